#!/usr/bin/env bats
# The prompt reader (common/config/prompt.c) through test-prompt: how the prompt is
# put together, the path rules against links and special files, the 1 MiB
# limit counted as saved, and the text conversions.  Every path test runs
# twice: with openat2(RESOLVE_BENEATH) where the kernel has it, and with the
# portable walk (--no-openat2).
load lib-common

MODES=("" --no-openat2)

# refused MODE WORDS...: test-prompt read fails; $output holds its message
refused() {
	run test-prompt read "$@"
	assert_failure 1
}

@test "prompt: arguments joined by spaces, then each file after a blank line" {
	printf 'step one\n' >plan.md
	printf 'step two' >more.md
	run test-prompt read do only step 2 --file plan.md --file more.md
	assert_success
	[ "$output" = "$(printf 'do only step 2\n\nstep one\n\n\nstep two')" ]
	run test-prompt read --file plan.md
	[ "$output" = "step one" ]
	run test-prompt read "two  spaces" kept
	[ "$output" = "two  spaces kept" ]
}

@test "prompt: stdin without arguments, with --file -, once only, not from a terminal" {
	run bash -c 'echo "from a pipe" | test-prompt read'
	assert_success
	assert_output "from a pipe"
	run bash -c 'echo piped | test-prompt read first --file -'
	assert_output "$(printf 'first\n\npiped')"
	# with arguments and no --file -, stdin is not read
	run bash -c 'echo piped | test-prompt read only words'
	assert_output "only words"
	run bash -c 'echo x | test-prompt read --file - --file -'
	assert_failure
	assert_output "EINVAL: '-': stdin can be read only once"
	# stdin a terminal: refused, unless named with --file -
	run /usr/bin/python3 - "$BUILD/test-prompt" <<-'PY'
		import os, pty, subprocess, sys
		m, s = pty.openpty()
		p = subprocess.run([sys.argv[1], "read"], stdin=s, capture_output=True, timeout=20)
		print(p.returncode, p.stderr.decode().strip())
		p = subprocess.run([sys.argv[1], "read", "words"], stdin=s, capture_output=True, timeout=20)
		print(p.returncode, p.stdout.decode())
		os.write(m, b"typed\n\x04")
		p = subprocess.run([sys.argv[1], "read", "--file", "-"], stdin=s, capture_output=True, timeout=20)
		print(p.returncode, p.stdout.decode().strip())
	PY
	assert_success
	assert_line --index 0 "1 ENOTTY: no prompt: give it as arguments, with --file, or on stdin (stdin is a terminal)"
	assert_line --index 1 "0 words"
	assert_line --index 2 "0 typed"
}

@test "prompt: an empty prompt is refused" {
	refused ""
	assert_output "ENODATA: the prompt is empty"
	: >empty.md
	refused --file empty.md
	assert_output "ENODATA: the prompt is empty"
	run bash -c 'printf " \n\t\n" | test-prompt read'
	assert_failure
	assert_output "ENODATA: the prompt is empty"
	run bash -c 'test-prompt read </dev/null'
	assert_output "ENODATA: the prompt is empty"
	# an empty file next to words is fine
	run test-prompt read words --file empty.md
	assert_success
}

@test "prompt: links and .. that stay inside the current folder are followed" {
	mkdir -p d/e
	echo inside >d/plan.md
	ln -s d/plan.md link
	ln -s ../plan.md d/e/up
	ln -s e d/elink
	for m in "${MODES[@]}"; do
		run test-prompt read $m --file link
		assert_output inside
		run test-prompt read $m --file d/e/up
		assert_output inside
		run test-prompt read $m --file d/elink/../plan.md
		assert_output inside
		run test-prompt read $m --file ./d/e/../../d/plan.md
		assert_output inside
	done
}

@test "prompt: a relative path or a link that leaves the current folder is refused" {
	echo TOP-SECRET-CONTENT >secret.txt
	mkdir -p work/sub
	cd work
	ln -s ../secret.txt out
	ln -s "$T/secret.txt" abs
	ln -s ../.. sub/up
	ln -s sub/up/secret.txt chained
	ln -s .. sub/parent
	ln -s out again
	for m in "${MODES[@]}"; do
		refused $m --file ../secret.txt
		assert_output "EXDEV: '../secret.txt': a relative path, and every link in it, must stay inside the current folder ('..' leaves it)"
		refused $m --file sub/../../secret.txt
		assert_output --partial "EXDEV: 'sub/../../secret.txt': a relative path"
		refused $m --file out
		assert_output "EXDEV: 'out': a relative path, and every link in it, must stay inside the current folder ('..' leaves it, through the link 'out' to '../secret.txt')"
		refused $m --file abs
		assert_output "EXDEV: 'abs': a relative path, and every link in it, must stay inside the current folder (the link 'abs' points to the absolute path '$T/secret.txt')"
		refused $m --file sub/up/secret.txt
		assert_output --partial "through the link 'up' to '../..'"
		refused $m --file chained
		assert_output --partial "EXDEV: 'chained':"
		refused $m --file sub/parent/../secret.txt
		assert_output --partial "EXDEV: 'sub/parent/../secret.txt':"
		refused $m --file again
		assert_output --partial "EXDEV: 'again':"
		# words before the bad file change nothing
		refused $m some words --file out
		assert_output --partial "EXDEV: 'out':"
	done
	refute_output --partial TOP-SECRET-CONTENT
}

@test "prompt: an absolute path may hold links but must not end in one" {
	mkdir real
	echo plan >real/plan.md
	ln -s real dirlink
	ln -s real/plan.md filelink
	cd /
	for m in "${MODES[@]}"; do
		run test-prompt read $m --file "$T/dirlink/plan.md"
		assert_success
		assert_output plan
		refused $m --file "$T/filelink"
		assert_output "ELOOP: '$T/filelink': an absolute path must not end in a link"
	done
}

@test "prompt: only a plain file: FIFOs (without blocking), folders, devices, sockets" {
	mkfifo fifo
	mkdir folder
	/usr/bin/python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind("sock")'
	ln -s fifo fifolink
	for m in "${MODES[@]}"; do
		run timeout 10 test-prompt read $m --file fifo
		assert_failure 1
		assert_output "EINVAL: 'fifo': is a pipe (FIFO); the file must be a plain file (for a pipe, use --file -)"
		run timeout 10 test-prompt read $m --file fifolink
		assert_failure 1
		assert_output --partial "'fifolink': is a pipe (FIFO)"
		refused $m --file folder
		assert_output "EISDIR: 'folder': is a folder; the file must be a plain file"
		refused $m --file .
		assert_output "EISDIR: '.': is a folder; the file must be a plain file"
		refused $m --file sock
		assert_output "EINVAL: 'sock': is a socket; the file must be a plain file"
		run timeout 10 test-prompt read $m --file /dev/zero
		assert_failure 1
		assert_output "EINVAL: '/dev/zero': is a character device; the file must be a plain file"
		run timeout 10 test-prompt read $m --file "$T/fifo"
		assert_failure 1
		assert_output --partial "is a pipe (FIFO)"
		refused $m --file missing.md
		assert_output "ENOENT: cannot open 'missing.md': No such file or directory"
		refused $m --file ""
		assert_output "ENOENT: '': an empty path names no file"
	done
}

@test "prompt: UTF-16 LE and BE and UTF-8 with a byte order mark are converted" {
	text='Plan: ünïcödé 日本語 and 🎉 (outside the BMP)'
	{ printf '\xff\xfe'; printf '%s\n' "$text" | iconv -f UTF-8 -t UTF-16LE; } >le.txt
	{ printf '\xfe\xff'; printf '%s\n' "$text" | iconv -f UTF-8 -t UTF-16BE; } >be.txt
	{ printf '\xef\xbb\xbf'; printf '%s\n' "$text"; } >bom8.txt
	for f in le.txt be.txt bom8.txt; do
		run test-prompt read --file $f
		assert_success
		assert_output "$text"
	done
	# the result is plain UTF-8 without a BOM
	test-prompt read --file le.txt >out
	[ "$(head -c 3 out | od -An -tx1 | tr -d ' ')" = "506c61" ]
	# without a BOM, UTF-16 is not text we accept (it holds NULs)
	printf '%s' "$text" | iconv -f UTF-8 -t UTF-16LE >nobom.txt
	refused --file nobom.txt
	assert_output --partial "EILSEQ: 'nobom.txt': a NUL character at byte 1"
}

@test "prompt: bad UTF-16 is refused: unpaired surrogates, odd length, NUL" {
	printf '\xff\xfea\x00\x3d\xd8b\x00' >high.txt  # high surrogate then 'b'
	printf '\xff\xfea\x00\x00\xdc' >low.txt       # lone low surrogate
	printf '\xff\xfea\x00\x3d\xd8' >end.txt       # high surrogate at the end
	printf '\xfe\xff\x00a\x00' >odd.txt
	printf '\xff\xfea\x00\x00\x00b\x00' >nul.txt
	refused --file high.txt
	assert_output "EILSEQ: 'high.txt': an unpaired UTF-16 surrogate at byte 4; the prompt must be UTF-8 text (or UTF-16 with a byte order mark)"
	refused --file low.txt
	assert_output --partial "'low.txt': an unpaired UTF-16 surrogate at byte 4"
	refused --file end.txt
	assert_output --partial "'end.txt': an unpaired UTF-16 surrogate"
	refused --file odd.txt
	assert_output --partial "'odd.txt': UTF-16 with an odd number of bytes"
	refused --file nul.txt
	assert_output --partial "'nul.txt': a NUL character at byte 4"
}

@test "prompt: invalid UTF-8 and NUL are refused, in files, stdin and arguments" {
	printf 'ok \xc0\xaf overlong' >overlong.txt
	printf 'ok \xed\xa0\x80 surrogate' >surrogate.txt
	printf 'ok \xf4\x90\x80\x80 too big' >toobig.txt
	printf 'ok \xe6\x97' >truncated.txt
	printf 'ok \x80 stray' >stray.txt
	printf 'ok \xff' >ff.txt
	printf 'a\x00b' >nul.txt
	for f in overlong surrogate toobig truncated stray ff; do
		refused --file $f.txt
		assert_output "EILSEQ: '$f.txt': invalid UTF-8 at byte 3; the prompt must be UTF-8 text (or UTF-16 with a byte order mark)"
	done
	refused --file nul.txt
	assert_output --partial "EILSEQ: 'nul.txt': a NUL character at byte 1"
	run bash -c 'printf "\xc3\x28" | test-prompt read'
	assert_failure 1
	assert_output --partial "EILSEQ: stdin: invalid UTF-8 at byte 0"
	refused fine "$(printf 'bad \xe2\x82')"
	assert_output --partial "EILSEQ: argument 2: invalid UTF-8 at byte 4"
	# valid 2-, 3- and 4-byte forms pass
	run test-prompt read "é ü 日本 🎉"
	assert_success
	assert_output "é ü 日本 🎉"
}

@test "prompt: exactly 1 MiB is accepted, one byte more is refused" {
	head -c 1048576 /dev/zero | tr '\0' a >mib.txt
	test-prompt read --file mib.txt >out
	[ "$(stat -c %s out)" -eq 1048576 ]
	head -c 1048577 /dev/zero | tr '\0' a >over.txt
	refused --file over.txt
	assert_output "EFBIG: the prompt is over 1048576 bytes (1 MiB), arguments and files together, as saved"
	# words and file together: 6 + 1048570 bytes is exactly 1 MiB
	head -c 1048570 /dev/zero | tr '\0' a >almost.txt
	test-prompt read 123456 --file almost.txt >out
	[ "$(stat -c %s out)" -eq $((1048576 + 2)) ] # with the blank line between
	refused 1234567 --file almost.txt
	assert_output --partial EFBIG
	refused 12 34 56 7 --file almost.txt
	assert_output --partial EFBIG
	# stdin
	head -c 1048576 /dev/zero | tr '\0' a | test-prompt read >out
	[ "$(stat -c %s out)" -eq 1048576 ]
	run bash -c 'head -c 1048577 /dev/zero | tr "\0" a | test-prompt read'
	assert_failure 1
	assert_output --partial EFBIG
	# several files together
	head -c 600000 /dev/zero | tr '\0' a >half.txt
	refused --file half.txt --file half.txt
	assert_output --partial EFBIG
	# the limit also holds for arguments alone (one argument is at most 128 KiB)
	w=$(head -c 116508 /dev/zero | tr '\0' a)
	last=$(head -c 116512 /dev/zero | tr '\0' a)   # 8 * 116508 + 116512 = 1 MiB
	test-prompt read "$w" "$w" "$w" "$w" "$w" "$w" "$w" "$w" "$last" >out
	[ "$(stat -c %s out)" -eq $((1048576 + 8)) ]
	refused "$w" "$w" "$w" "$w" "$w" "$w" "$w" "$w" "$last" b
	assert_output --partial EFBIG
}

@test "prompt: the limit counts UTF-16 as saved, BOM included" {
	# 600000 characters: 1200002 bytes saved in UTF-16, 600000 in UTF-8
	{ printf '\xff\xfe'; head -c 600000 /dev/zero | tr '\0' a | iconv -f UTF-8 -t UTF-16LE; } >big16.txt
	[ "$(stat -c %s big16.txt)" -eq 1200002 ]
	refused --file big16.txt
	assert_output --partial EFBIG
	# exactly 1 MiB saved, BOM included: accepted
	{ printf '\xff\xfe'; head -c 524287 /dev/zero | tr '\0' a | iconv -f UTF-8 -t UTF-16LE; } >mib16.txt
	[ "$(stat -c %s mib16.txt)" -eq 1048576 ]
	test-prompt read --file mib16.txt >out
	[ "$(stat -c %s out)" -eq 524287 ]
	{ cat mib16.txt; printf 'a\x00'; } >over16.txt
	refused --file over16.txt
	assert_output --partial EFBIG
	# a UTF-8 BOM counts too
	{ printf '\xef\xbb\xbf'; head -c 1048574 /dev/zero | tr '\0' a; } >bom.txt
	refused --file bom.txt
	assert_output --partial EFBIG
}

@test "prompt: without openat2 (old kernel, or a filter that forbids it) the same rules hold" {
	echo TOP-SECRET-CONTENT >secret.txt
	mkdir work
	cd work
	echo inside >plan.md
	ln -s plan.md link
	ln -s ../secret.txt out
	for e in ENOSYS EPERM; do
		run test-prompt deny-openat2 $e have-openat2
		assert_output no
		run test-prompt deny-openat2 $e read --file link
		assert_success
		assert_output inside
		run test-prompt deny-openat2 $e read --file out
		assert_failure 1
		assert_output --partial "EXDEV: 'out': a relative path, and every link in it, must stay inside the current folder"
		run test-prompt deny-openat2 $e read --file ../secret.txt
		assert_failure 1
		assert_output --partial "EXDEV: '../secret.txt'"
	done
}
