#!/usr/bin/env bats
# Output lines and the sanitizer for untrusted text (common/base/out.c), through
# test-prompt sanitize / lines.  What came from the VM must never reach the
# terminal as a control, an escape sequence, invalid UTF-8 or a line that
# pretends to be from aibox.
load lib-common

# no_controls FILE: no C0 control but \n, no DEL, no ESC, no C1 (as UTF-8)
no_controls() {
	! LC_ALL=C grep -q $'[\x01-\x09\x0b-\x1f\x7f]' "$1" &&
		! LC_ALL=C grep -q $'\xc2[\x80-\x9f]' "$1" &&
		iconv -f UTF-8 -t UTF-8 "$1" >/dev/null
}

# no_format FILE: no hidden character (test-prompt hidden-chars), no U+2028 or U+2029
no_format() {
	test-prompt hidden-chars >"$BATS_TEST_TMPDIR/cf"
	python3 - "$1" "$BATS_TEST_TMPDIR/cf" <<-'EOF'
		import sys
		bad = {int(l, 16) for l in open(sys.argv[2])} | {0x2028, 0x2029}
		sys.exit(any(ord(c) in bad for c in open(sys.argv[1], encoding="utf-8").read()))
	EOF
}

@test "out: lines are HH:MM:SS source[id6]: text in local time" {
	run bash -c 'printf "hello" | TZ=UTC test-prompt lines vm 20261007-170916-259e07 0'
	assert_success
	assert_output "00:00:00 vm[259e07]: hello"
	run bash -c 'printf "hello" | TZ=UTC-2 test-prompt lines aibox abc 3661'
	assert_output "03:01:01 aibox[abc]: hello"
	run bash -c 'printf "no id" | TZ=UTC test-prompt lines aibox - 0'
	assert_output "00:00:00 aibox: no id"
	# now, written with one write per line
	run bash -c 'printf "now" | test-prompt lines vm abcdef'
	assert_output --regexp '^([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9] vm\[abcdef\]: now$'
}

@test "out: every line of a text gets its own prefix, so none can pose as aibox" {
	printf 'one\naibox[123456]: task finished\r\n\nfour\rfive\n' >in
	TZ=UTC test-prompt lines vm abcdef 0 <in >out
	run cat out
	assert_line --index 0 "00:00:00 vm[abcdef]: one"
	assert_line --index 1 "00:00:00 vm[abcdef]: aibox[123456]: task finished"
	assert_line --index 2 "00:00:00 vm[abcdef]: "
	assert_line --index 3 "00:00:00 vm[abcdef]: four"
	assert_line --index 4 "00:00:00 vm[abcdef]: five"
	[ "$(wc -l <out)" -eq 5 ]
	[ "$(grep -cv '^00:00:00 vm\[abcdef\]: ' out)" -eq 0 ]
	# escape sequences cannot move the cursor back to fake a line either
	printf 'x\x1b[2K\x1b[1G\x1b[1Aaibox[1]: fake\x1bE\x1bDnext\x0b\x0cend' >in
	TZ=UTC test-prompt lines vm abcdef 0 <in >out
	run cat out
	assert_output "00:00:00 vm[abcdef]: xaibox[1]: fakenextend"
}

@test "out: escape sequences are dropped whole, the text around them kept" {
	run bash -c "printf 'a\x1b[1;31mred\x1b[0mb' | test-prompt sanitize"
	assert_output "aredb"
	# OSC title ended by BEL and by ST, OSC 52 clipboard write, hyperlink
	run bash -c "printf 'a\x1b]0;evil title\x07b\x1b]2;t\x1b\\\\c\x1b]52;c;ZXZpbA==\x07d\x1b]8;;http://x\x1b\\\\link\x1b]8;;\x1b\\\\e' | test-prompt sanitize"
	assert_output "abcdlinke"
	# DCS, SOS, PM, APC strings
	run bash -c "printf 'a\x1bP+q544e\x1b\\\\b\x1bXsos\x1b\\\\c\x1b^pm\x1b\\\\d\x1b_apc\x1b\\\\e' | test-prompt sanitize"
	assert_output "abcde"
	# charset selection, reset, keypad, save/restore cursor
	run bash -c "printf 'a\x1b(0b\x1bcc\x1b=d\x1b7e\x1b8f\x1b#8g' | test-prompt sanitize"
	assert_output "abcdefg"
	# 8-bit C1 forms, encoded as UTF-8: CSI, OSC ... ST, and plain C1 controls
	run bash -c "printf 'a\xc2\x9b2Jb\xc2\x9d0;title\xc2\x9cc\xc2\x85d\xc2\x9fapc\xc2\x9ce' | test-prompt sanitize"
	assert_output "abcde"
	# an OSC without an end stops at the line break; a lone ESC goes alone
	run bash -c "printf 'a\x1b]0;never ends\nnext\x1b' | test-prompt sanitize"
	assert_output "$(printf 'a\nnext')"
	# a CSI cut short by a control or a non-ASCII byte
	run bash -c "printf 'a\x1b[12\nb\x1b[1\xc3\xa9c' | test-prompt sanitize"
	assert_output "$(printf 'a\nb\xc3\xa9c')"
}

@test "out: C0 controls and DEL are dropped, tabs become spaces to the next stop" {
	run bash -c "printf 'a\x00b\x07c\x08d\x7fe\x1cf\x05g' | test-prompt sanitize"
	assert_output "abcdefg"
	run bash -c "printf 'ab\tc\t\td' | test-prompt sanitize"
	assert_output "ab      c               d"
	run bash -c "printf 'é\tx' | test-prompt sanitize"
	assert_output "é       x"
}

@test "out: invalid UTF-8 becomes U+FFFD, valid text passes unchanged" {
	# overlong, surrogate, above U+10FFFF, stray continuation, bad lead, truncated
	run bash -c "printf 'a\xc0\xafb\xed\xa0\x80c\xf4\x90\x80\x80d\x80e\xfff\xe6\x97' | test-prompt sanitize"
	assert_output "a��b���c����d�e�f�"
	run bash -c "printf 'é 日本語 🎉 Ω' | test-prompt sanitize"
	assert_output "é 日本語 🎉 Ω"
}

@test "out: format characters are shown as <U+XXXX>, never passed on" {
	# zero-width space, byte order mark, soft hyphen, zero-width joiner, word joiner
	run bash -c "printf 'a\xe2\x80\x8bb\xef\xbb\xbfc\xc2\xadd\xe2\x80\x8de\xe2\x81\xa0f' | test-prompt sanitize"
	assert_success
	assert_output "a<U+200B>b<U+FEFF>c<U+00AD>d<U+200D>e<U+2060>f"
	# the tag characters: LANGUAGE TAG, then "hi" hidden as TAG LATIN SMALL LETTERs, CANCEL TAG
	run bash -c "printf 'a\xf3\xa0\x80\x81\xf3\xa0\x81\xa8\xf3\xa0\x81\xa9\xf3\xa0\x81\xbfb' | test-prompt sanitize"
	assert_success
	assert_output "a<U+E0001><U+E0068><U+E0069><U+E007F>b"
	# bidi: RLO, LRE, LRI, PDI, RLM, ALM
	run bash -c "printf 'a\xe2\x80\xaeb\xe2\x80\xaac\xe2\x81\xa6d\xe2\x81\xa9e\xe2\x80\x8ff\xd8\x9cg' | test-prompt sanitize"
	assert_success
	assert_output "a<U+202E>b<U+202A>c<U+2066>d<U+2069>e<U+200F>f<U+061C>g"
	# the rest of the range's ends: U+0600, U+180E, U+FFFB, U+110BD, U+1343F, U+1D17A
	run bash -c "printf '\xd8\x80\xe1\xa0\x8e\xef\xbf\xbb\xf0\x91\x82\xbd\xf0\x93\x90\xbf\xf0\x9d\x85\xba' | test-prompt sanitize"
	assert_success
	assert_output "<U+0600><U+180E><U+FFFB><U+110BD><U+1343F><U+1D17A>"
	# their neighbours are ordinary characters and pass: U+200A, U+2801, U+E1000
	# (U+2065 and U+E0080, unassigned, are default-ignorable: the next test)
	run bash -c "printf 'a\xe2\x80\x8ab\xe2\xa0\x81c\xf3\xa1\x80\x80d' | test-prompt sanitize"
	assert_success
	assert_output "$(printf 'a\xe2\x80\x8ab\xe2\xa0\x81c\xf3\xa1\x80\x80d')"
	# a tab after an escape goes to the next stop counted in what is shown
	run bash -c "printf '\xe2\x80\x8b\tx' | test-prompt sanitize"
	assert_success
	assert_output "<U+200B>        x"
}

@test "out: the format characters are Unicode 15's category Cf, every one" {
	data=/usr/share/unicode/UnicodeData.txt
	[ -r "$data" ] || skip "no $data (Debian's unicode-data)"
	grep -q '^1343F;' "$data" || skip "$data is older than Unicode 15"
	awk -F';' '$3 == "Cf" { print $1 }' "$data" >want
	run test-prompt format-chars
	assert_success
	printf '%s\n' "$output" >got
	diff want got
	[ "$(wc -l <got)" -eq 170 ]
}

@test "out: default-ignorable characters and U+2800 are shown as <U+XXXX>, never passed on" {
	# variation selectors 1, 16, 17 and 256, after a letter as an emoji's would be
	run bash -c "printf 'a\xef\xb8\x80b\xef\xb8\x8fc\xf3\xa0\x84\x80d\xf3\xa0\x87\xafe' | test-prompt sanitize"
	assert_success
	assert_output "a<U+FE00>b<U+FE0F>c<U+E0100>d<U+E01EF>e"
	# the combining grapheme joiner, the Hangul fillers, the braille blank
	run bash -c "printf 'a\xcd\x8fb\xe1\x85\x9fc\xe1\x85\xa0d\xe3\x85\xa4e\xef\xbe\xa0f\xe2\xa0\x80g' | test-prompt sanitize"
	assert_success
	assert_output "a<U+034F>b<U+115F>c<U+1160>d<U+3164>e<U+FFA0>f<U+2800>g"
	# Khmer's inherent vowels, Mongolian's free variation selectors, the reserved
	# default-ignorable code points (U+2065, U+FFF0, U+E0000, U+E0FFF)
	run bash -c "printf '\xe1\x9e\xb4\xe1\xa0\x8b\xe1\xa0\x8f\xe2\x81\xa5\xef\xbf\xb0\xf3\xa0\x80\x80\xf3\xa0\xbf\xbf' | test-prompt sanitize"
	assert_success
	assert_output "<U+17B4><U+180B><U+180F><U+2065><U+FFF0><U+E0000><U+E0FFF>"
	# what a hidden payload in variation selectors would carry is seen
	python3 -c 'import sys; sys.stdout.write("ok" + "".join(chr(0xE0100 + b) for b in b"rm -rf ~"))' >in
	run test-prompt sanitize <in
	assert_output "ok<U+E0172><U+E016D><U+E0120><U+E012D><U+E0172><U+E0166><U+E0120><U+E017E>"
}

@test "out: the hidden characters are Cf, Default_Ignorable_Code_Point and U+2800, every one" {
	data=/usr/share/unicode/UnicodeData.txt
	props=/usr/share/unicode/DerivedCoreProperties.txt
	[ -r "$data" ] && [ -r "$props" ] || skip "no $data or $props (Debian's unicode-data)"
	grep -q '^1343F;' "$data" || skip "$data is older than Unicode 15"
	python3 - "$data" "$props" >want <<-'PY'
		import sys
		want = {0x2800}
		for line in open(sys.argv[1]):
		    f = line.split(";")
		    if f[2] == "Cf":
		        want.add(int(f[0], 16))
		for line in open(sys.argv[2]):
		    f = line.split("#")[0].split(";")
		    if len(f) == 2 and f[1].strip() == "Default_Ignorable_Code_Point":
		        a, _, b = f[0].strip().partition("..")
		        want.update(range(int(a, 16), int(b or a, 16) + 1))
		print("\n".join("%04X" % c for c in sorted(want)))
	PY
	run test-prompt hidden-chars
	assert_success
	printf '%s\n' "$output" >got
	diff want got
	# the Cf, the default-ignorable ones outside Cf, U+2800
	[ "$(wc -l <got)" -eq $((170 + 4174 - 138 + 1)) ]
}

@test "out: U+2028 and U+2029 are line breaks, each new line with its prefix" {
	printf 'one\xe2\x80\xa8aibox[123456]: fake\xe2\x80\xa9two' >in
	TZ=UTC test-prompt lines vm abcdef 0 <in >out
	run cat out
	assert_success
	assert_line --index 0 "00:00:00 vm[abcdef]: one"
	assert_line --index 1 "00:00:00 vm[abcdef]: aibox[123456]: fake"
	assert_line --index 2 "00:00:00 vm[abcdef]: two"
	[ "$(wc -l <out)" -eq 3 ]
}

@test "out: long lines are split at a character boundary, each piece prefixed" {
	{ head -c 1999 /dev/zero | tr '\0' a; printf 'é'; head -c 10 /dev/zero | tr '\0' b; } >in
	TZ=UTC test-prompt lines vm abcdef 0 <in >out
	[ "$(wc -l <out)" -eq 2 ]
	line1=$(sed -n 1p out)
	line2=$(sed -n 2p out)
	# the 2-byte é does not fit in 2000 bytes after 1999 a's: it starts line 2
	[ "${#line1}" -eq $((21 + 1999)) ]
	[ "$line2" = "00:00:00 vm[abcdef]: ébbbbbbbbbb" ]
	head -c 5000 /dev/zero | tr '\0' x | TZ=UTC test-prompt lines vm abcdef 0 >out
	[ "$(wc -l <out)" -eq 3 ]
	[ "$(grep -c '^00:00:00 vm\[abcdef\]: x*$' out)" -eq 3 ]
}

@test "out: a relayed line handed on at its bound is followed by no empty line when its newline comes later" {
	# 2000 bytes (OUT_LINE_MAX), then 3000, each with its newline in a later read; the
	# empty line after "next" is the writer's own and stays; a CRLF ends the line as a
	# newline does (the sanitizer reads "\r" as a line break), its "\r" and "\n" apart too
	{
		head -c 2000 /dev/zero | tr '\0' a
		sleep 0.5
		printf '\nnext\n\nafter an empty one\n'
		head -c 3000 /dev/zero | tr '\0' b
		sleep 0.5
		printf '\nlast\n'
		head -c 2000 /dev/zero | tr '\0' c
		sleep 0.5
		printf '\r'
		sleep 0.5
		printf '\nafter a CRLF\n'
	} | TZ=UTC test-prompt relay aibox abcdef 2>out
	run sed -E 's/^[0-9:]{8} //; s/: ([abc]){2000}$/: <2000 \1>/; s/: b{1000}$/: <1000 b>/' out
	assert_output "aibox[abcdef]: <2000 a>
aibox[abcdef]: next
aibox[abcdef]: 
aibox[abcdef]: after an empty one
aibox[abcdef]: <2000 b>
aibox[abcdef]: <1000 b>
aibox[abcdef]: last
aibox[abcdef]: <2000 c>
aibox[abcdef]: after a CRLF"
}

@test "out: a relayed line cut at its bound keeps a character split there whole" {
	# 1999 bytes and the first byte of an "é" reach the relay before its second one: the
	# cut falls before the "é", which starts the next piece whole, never two U+FFFD
	{
		head -c 1999 /dev/zero | tr '\0' a
		printf '\xc3'
		sleep 0.5
		printf '\xa9b\n'
	} | TZ=UTC test-prompt relay aibox abcdef 2>out
	run sed -E 's/^[0-9:]{8} //; s/: a{1999}$/: <1999 a>/' out
	assert_output "aibox[abcdef]: <1999 a>
aibox[abcdef]: éb"
}

@test "out: a relayed line cut at its bound and ended by a lone CR at the end of the stream adds no empty line" {
	# the "\r" of a "\r\n" whose "\n" never comes: the end of the line, no line of its own
	{
		head -c 2000 /dev/zero | tr '\0' c
		sleep 0.5
		printf '\r'
	} | TZ=UTC test-prompt relay aibox abcdef 2>out
	run sed -E 's/^[0-9:]{8} //; s/: c{2000}$/: <2000 c>/' out
	assert_output "aibox[abcdef]: <2000 c>"
}

@test "out: a relayed line cut at its bound and broken right after by a CR or U+2028 adds no empty line" {
	# as the line whole would read: the break ends the line, what follows is the next one
	{
		head -c 2000 /dev/zero | tr '\0' a
		sleep 0.5
		printf '\rnext\n'
		head -c 2000 /dev/zero | tr '\0' b
		sleep 0.5
		printf '\xe2\x80\xa8after\n'
		head -c 2000 /dev/zero | tr '\0' c
		sleep 0.5
		printf '\xe2\x80\xa9\nend\n'
	} | TZ=UTC test-prompt relay aibox abcdef 2>out
	run sed -E 's/^[0-9:]{8} //; s/: ([abc]){2000}$/: <2000 \1>/' out
	assert_output "aibox[abcdef]: <2000 a>
aibox[abcdef]: next
aibox[abcdef]: <2000 b>
aibox[abcdef]: after
aibox[abcdef]: <2000 c>
aibox[abcdef]: end"
}

# on_terminal COLS FILE: test-prompt lines vm abcdef of FILE, written to a
# terminal COLS columns wide (script's pseudo-terminal), its rows to stdout
on_terminal() {
	script -qc "stty cols $1; test-prompt lines vm abcdef <'$2'" /dev/null </dev/null | tr -d '\r'
}

@test "out: on a terminal each piece fits its row, so no row starts with the line's own text" {
	command -v script >/dev/null || skip "script (bsdutils) is not installed"
	# padded so that the terminal's wrap would start a row with a line of aibox's
	python3 -c 'print("x" * 59 + "12:00:00 aibox[abcdef]: git fetch /evil aibox/task:ok" + "é日" * 40)' >in
	on_terminal 80 in >out
	# every row is a line with the VM's prefix, at most 80 columns (é one, 日 two)
	run python3 - out 80 <<-'PY'
		import re, sys, unicodedata
		for row in open(sys.argv[1], encoding="utf-8").read().splitlines():
		    cols = sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in row)
		    if not re.match(r"[0-9]{2}:[0-9]{2}:[0-9]{2} vm\[abcdef\]: ", row) or cols > int(sys.argv[2]):
		        print("bad row (%d columns): %s" % (cols, row))
	PY
	assert_output ''
	[ "$(wc -l <out)" -ge 4 ]
	# nothing lost: the pieces joined are the line
	[ "$(sed 's/^[0-9:]* vm\[abcdef\]: //' out | tr -d '\n')" = "$(cat in)" ]
	# a terminal narrower than the prefix still gets 20 columns of text a row
	on_terminal 10 in >out
	[ "$(sed -n 1p out | sed 's/^[0-9:]* vm\[abcdef\]: //')" = "xxxxxxxxxxxxxxxxxxxx" ]
	# not a terminal: one line (up to 2000 bytes), as before
	test-prompt lines vm abcdef <in >out
	[ "$(wc -l <out)" -eq 1 ]
	# aibox's own lines are not cut on a terminal: a fetch command in one copies whole
	script -qc "stty cols 80; test-prompt lines aibox abcdef <in" /dev/null </dev/null | tr -d '\r' >out
	[ "$(wc -l <out)" -eq 1 ]
}

@test "out: on a terminal that does not say its width each piece fits 80 columns, never the whole line" {
	command -v script >/dev/null || skip "script (bsdutils) is not installed"
	# a terminal of 0 columns (a serial console, a pseudo-terminal not sized yet) still wraps
	# at its real width: 80, the width assumed when none is known
	python3 -c 'print("x" * 59 + "12:00:00 aibox[abcdef]: git fetch /evil aibox/task:ok" + "y" * 100)' >in
	on_terminal 0 in >out
	run awk 'length($0) > 80' out
	assert_output ''
	run grep -cvE '^[0-9:]{8} vm\[abcdef\]: ' out
	assert_output 0
	[ "$(wc -l <out)" -eq 4 ]
	[ "$(sed 's/^[0-9:]* vm\[abcdef\]: //' out | tr -d '\n')" = "$(cat in)" ]
}

@test "out: hostile bytes of every kind give clean UTF-8 lines" {
	head -c 65536 /dev/urandom >random
	# and valid UTF-8 thick with the characters to hide
	python3 -c 'import random,sys; sys.stdout.write("".join(chr(random.choice([0x200b,0x2028,0x2029,0xfeff,0xe0001,0xe0041,0x202e,0x2066,0xfe0f,0xe0100,0x34f,0x3164,0x2800,0x9b,0x1b,0x41,0x0a])) for _ in range(20000)))' >>random
	TZ=UTC test-prompt lines vm abcdef 0 <random >out
	no_controls out
	no_format out
	[ "$(grep -cv '^00:00:00 vm\[abcdef\]: ' out)" -eq 0 ]
	# cleaning again changes nothing
	test-prompt sanitize <random >once
	test-prompt sanitize <once >twice
	cmp once twice
	# and the check itself catches what it should
	printf 'a\x1bb' >bad
	run ! no_controls bad
	printf 'a\xc2\x9bb' >bad
	run ! no_controls bad
	printf 'a\xffb' >bad
	run ! no_controls bad
	printf 'a\xe2\x80\x8bb' >bad
	run ! no_format bad
	printf 'a\xe2\x80\xa8b' >bad
	run ! no_format bad
}

@test "out: under a locale whose charset is not UTF-8 no byte of a C1 control goes out, every other character as <U+XXXX>" {
	# "Û" is C3 9B: on a terminal of an 8-bit charset its 9B is CSI, and "2J" clears it; the
	# 97 of "日" (E6 97 A5) is a C1 control there too
	printf 'a\xc3\x9b2Jb \xe6\x97\xa5 \xc3\xa9\n' >in
	for loc in en_US.ISO-8859-1 ru_RU.KOI8-R en_US de_DE@euro; do
		run env LC_ALL="$loc" TZ=UTC test-prompt lines vm abcdef 0 <in
		assert_success
		assert_output "00:00:00 vm[abcdef]: a<U+00DB>2Jb <U+65E5> <U+00E9>"
		run env LC_ALL= LC_CTYPE="$loc" LANG=C.UTF-8 TZ=UTC test-prompt lines vm abcdef 0 <in
		assert_output "00:00:00 vm[abcdef]: a<U+00DB>2Jb <U+65E5> <U+00E9>"
	done
	# UTF-8, spelled either way, the first of LC_ALL, LC_CTYPE and LANG that is set; C and
	# POSIX (no charset of their own, the terminal's is taken): the text as it is
	for env in LC_ALL=C.UTF-8 LC_ALL=en_US.utf8 'LC_ALL=C.UTF-8 LANG=en_US.ISO-8859-1' \
		'LC_ALL= LC_CTYPE= LANG=de_DE.UTF-8@euro' LC_ALL=C LC_ALL=POSIX 'LC_ALL= LC_CTYPE= LANG='; do
		run env $env TZ=UTC test-prompt lines vm abcdef 0 <in
		assert_output "00:00:00 vm[abcdef]: aÛ2Jb 日 é"
	done
}

@test "out: each line goes out in one write, so lines of several writers do not mix" {
	command -v strace >/dev/null || skip "strace is not installed"
	printf 'one\ntwo\nthree' >in
	# LeakSanitizer cannot run under ptrace (make SANITIZE=1)
	ASAN_OPTIONS=detect_leaks=0 strace -o trace -e trace=write test-prompt lines vm abcdef <in >out 2>/dev/null
	[ "$(grep -c '^write(1, ' trace)" -eq 3 ]
	grep -q '^write(1, "[0-9:]* vm\[abcdef\]: two\\n", 25) *= 25$' trace
}
