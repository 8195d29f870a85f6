#!/usr/bin/env bats
# aibox-bundle-check and the header parser, on the fixtures of
# t/make-bundle-fixtures (t/fixtures/bundles/): each good one accepted, each
# bad one refused with its reason, exit codes 0/1/2 as documented.
load lib-common
bats_require_minimum_version 1.5.0

F=$BATS_TEST_DIRNAME/fixtures/bundles
oid() { awk -v n="$1" '$1 == n { print $2 }' "$F/oids"; }

# refused FILE REASON [ARGS...]: exit 1, exactly one line naming the file and reason.
refused() {
	local file=$1 reason=$2
	shift 2
	run --separate-stderr aibox-bundle-check "$@" "$file"
	assert_equal "$status" 1
	assert_equal "$stderr" "aibox-bundle-check: $file: $reason"
	assert_equal "$output" ""
}

accepted() {
	run --separate-stderr aibox-bundle-check "$@"
	assert_equal "$stderr" ""
	assert_equal "$status" 0
}

@test "bundle-check: good v2 and v3 bundles are accepted, header and pack" {
	accepted --ref aibox/task "$F/good-v2.bundle"
	accepted --ref aibox/task --pack "$F/good-v2.bundle"
	accepted --ref refs/heads/aibox/task --pack "$F/good-v3.bundle"
	accepted --ref aibox/task --base "$(oid base)" "$F/good-v2-base.bundle"
	accepted --ref aibox/task --base "$(oid base)" "$F/good-v3-base.bundle"
	accepted "$F/two-refs.bundle"
	accepted --pack "$F/good-delta.bundle"
}

@test "bundle-check: a sha256 bundle is accepted where every id is sha256" {
	accepted --ref aibox/task "$F/good-sha256.bundle"
	run aibox-bundle-check --json "$F/good-sha256.bundle"
	assert_success
	[ "$(jq -r .object_format <<<"$output")" = sha256 ]
	[ "$(jq -r '.refs[0].oid | length' <<<"$output")" = 64 ]
	refused "$F/sha256-mismatch.bundle" "line 3: object id is not sha256"
	refused "$F/sha1-long-id.bundle" "line 2: object id is not sha1"
	refused "$F/good-sha256.bundle" "pack: sha256 packs cannot be verified (only sha1)" --pack
}

@test "bundle-check: refs must be exactly the set given" {
	refused "$F/two-refs.bundle" "unexpected ref 'refs/heads/main'" --ref aibox/task
	refused "$F/tag.bundle" "unexpected ref 'refs/tags/aibox/task'" --ref aibox/task
	refused "$F/wrong-branch.bundle" "unexpected ref 'refs/heads/main'" --ref aibox/task
	refused "$F/good-v2.bundle" "missing ref 'refs/heads/main'" --ref aibox/task --ref main
	accepted --ref aibox/task --ref main "$F/two-refs.bundle"
	accepted --ref refs/tags/aibox/task "$F/tag.bundle"
}

@test "bundle-check: prerequisites must be given bases" {
	refused "$F/good-v2-base.bundle" "needs prerequisite $(oid base) (no --base given)" \
		--ref aibox/task
	refused "$F/other-prereq.bundle" "prerequisite $(oid root) is not a given base" \
		--ref aibox/task --base "$(oid base)"
	# Either case of hex is the same id.
	accepted --base "$(oid base | tr a-f A-F)" "$F/good-v2-base.bundle"
	accepted --base "$(oid root)" --base "$(oid base)" "$F/other-prereq.bundle"
}

@test "bundle-check: broken headers are refused with their reason" {
	refused "$F/truncated-header.bundle" "line 2: header ends in mid-line (truncated)"
	refused "$F/no-blank-line.bundle" "line 3: pack starts without the blank line"
	refused "$F/crlf.bundle" "line 1: carriage return in header (CRLF?)"
	refused "$F/nul.bundle" "line 2: NUL byte in header"
	refused "$F/unknown-cap.bundle" "line 3: unknown capability '@frobnicate'"
	refused "$F/filter.bundle" "line 3: filtered (partial) bundles are not accepted"
	refused "$F/bad-signature.bundle" "not a git bundle (no bundle signature)"
	refused "$F/v4.bundle" "unsupported bundle version"
	refused "$F/bad-refname.bundle" "line 2: invalid ref name 'refs/heads/a..b'"
	refused "$F/bad-oid.bundle" "line 2: not an object id"
	refused "$F/cap-in-v2.bundle" "line 2: capability in a v2 bundle"
	refused "$F/dup-ref.bundle" "line 3: ref 'refs/heads/aibox/task' given twice"
	refused "$F/no-refs.bundle" "bundle has no refs"
	refused "$F/long-line.bundle" "line 2: longer than 4096 bytes"
	refused "$F/empty.bundle" "empty file"
}

@test "bundle-check: a header that ends at EOF without its blank line is refused" {
	printf '# v2 git bundle\n%s refs/heads/aibox/task\n' "$(oid task)" >eof.bundle
	refused eof.bundle "header ends before the blank line (truncated)"
	printf '# v3 git bundle\n@object-format=sha1\n@object-format=sha1\n' >twice.bundle
	refused twice.bundle "line 3: object-format given twice"
	printf '# v2 git bundle\n%s refs/heads/x\n-%s\n\nPACK' "$(oid task)" "$(oid base)" >order.bundle
	refused order.bundle "line 3: prerequisite after a ref"
	printf '# v2 git bundle\n%s refs/heads/x\n\n' 0000000000000000000000000000000000000000 >null.bundle
	refused null.bundle "line 2: null object id"
}

@test "bundle-check: 100,000 refs and an oversize header are refused, quickly" {
	"$TOP/t/make-bundle-fixtures" --large "$T/large"
	[ "$(grep -c refs/heads/ large/refs-100000.bundle)" = 100000 ]
	refused large/refs-100000.bundle "more than 10000 refs"
	refused large/oversize-header.bundle "header larger than 1048576 bytes"
}

@test "bundle-check: broken packs are refused with their reason" {
	refused "$F/truncated-pack.bundle" "pack: object 6: its data ends early (truncated?)" --pack
	refused "$F/bad-checksum.bundle" "pack: checksum mismatch" --pack
	refused "$F/wrong-count.bundle" "pack: ends after 13 of 14 objects (truncated?)" --pack
	refused "$F/wrong-count-low.bundle" \
		"pack: 18 bytes after the last of 12 objects (wrong object count?)" --pack
	refused "$F/bad-zlib.bundle" "pack: object 0 does not inflate (incorrect header check)" --pack
	refused "$F/bad-size.bundle" "pack: object 0: inflates to 14 bytes, not 17" --pack
	refused "$F/bad-delta.bundle" "pack: failed to apply delta" --pack
	refused "$F/bad-pack-signature.bundle" "pack: no pack signature" --pack
	refused "$F/bad-pack-version.bundle" "pack: unsupported version 9" --pack
	refused "$F/trailing-garbage.bundle" \
		"pack: 7 bytes after the last of 13 objects (wrong object count?)" --pack
	# Without --pack only the header is read, so these pass.
	accepted "$F/bad-checksum.bundle"
	accepted "$F/bad-zlib.bundle"
}

# pack_bundle NAME HEX...: NAME.bundle, a v2 bundle whose pack holds the objects given as
# hex bytes (each header and data as it stands in a pack), count and checksum right; its
# one ref, aibox/task, is at $TIP (default 1111...).
pack_bundle() {
	python3 - "$@" <<'PY'
import hashlib, os, struct, sys
name, objs = sys.argv[1], [bytes.fromhex(h) for h in sys.argv[2:]]
pack = b"PACK" + struct.pack(">II", 2, len(objs)) + b"".join(objs)
pack += hashlib.sha1(pack).digest()
tip = os.environ.get("TIP", "1" * 40).encode()
head = b"# v2 git bundle\n" + tip + b" refs/heads/aibox/task\n\n"
open(name + ".bundle", "wb").write(head + pack)
PY
}

@test "bundle-check: each pack object's header is checked: its size, type and delta base" {
	local blob
	blob=32$(python3 -c 'import zlib; print(zlib.compress(b"hi").hex())') # a blob of 2 bytes
	pack_bundle size bfffffffffffffffffffff01 00000000
	refused size.bundle "pack: object 0: bad size" --pack
	pack_bundle type 51789c630400000200 # a type 5 object
	refused type.bundle "pack: object 0: unknown type 5" --pack
	pack_bundle out 6105789c630400000200 # a delta 5 bytes back, before the first object
	refused out.bundle "pack: object 0: delta base out of the pack" --pack
	pack_bundle mid "$blob" 6103789c630400000200 # a delta 3 bytes back, into the blob
	refused mid.bundle "pack: object 1: delta base is not an object" --pack
	pack_bundle ref 71000102030405 # a delta whose base's id is cut short
	refused ref.bundle "pack: object 0: truncated" --pack
	# The same helper's pack of a blob, a tree and a commit, aibox/task at the commit.
	read -r tip tree commit < <(python3 - <<'PY'
import hashlib, zlib
def entry(t, kind, data):  # the object's id, and its pack entry in hex (data under 2 KiB)
    n = len(data)
    head = bytes([t << 4 | n & 15 | 0x80, n >> 4]) if n > 15 else bytes([t << 4 | n])
    return hashlib.sha1(kind + b" %d\0" % n + data).hexdigest(), (head + zlib.compress(data)).hex()
blob, _ = entry(3, b"blob", b"hi")
tree, tree_hex = entry(2, b"tree", b"100644 f\0" + bytes.fromhex(blob))
who = b"T <t@x> 1 +0000"
commit, commit_hex = entry(1, b"commit", b"tree %s\nauthor %s\ncommitter %s\n\nm\n" % (tree.encode(), who, who))
print(commit, tree_hex, commit_hex)
PY
	)
	TIP=$tip pack_bundle good "$blob" "$tree" "$commit"
	accepted --pack good.bundle
}

@test "bundle-check: a thin pack's bases come from --repo, else it is refused" {
	refused "$F/good-v2-base.bundle" \
		"pack: a delta's base is not in the pack (a thin pack: give --repo)" \
		--pack --base "$(oid base)"
	refused "$F/missing-base.bundle" \
		"pack: a delta's base is not in the pack (a thin pack: give --repo)" --pack
	# The fixture script makes the same commits every time.
	"$TOP/t/make-bundle-fixtures" --repo "$T/repo"
	[ "$(git -C repo rev-parse main)" = "$(oid base)" ]
	accepted --pack --repo repo --base "$(oid base)" "$F/good-v2-base.bundle"
	accepted --pack --repo repo --base "$(oid base)" --ref aibox/task "$F/good-v3-base.bundle"
	# A repository that lacks the base does not help.
	git init -q empty
	run aibox-bundle-check --pack --repo empty --base "$(oid base)" "$F/good-v2-base.bundle"
	assert_equal "$status" 1
}

@test "bundle-check: --json prints what was read and the verdict" {
	run --separate-stderr aibox-bundle-check --json --pack --ref aibox/task "$F/good-v2.bundle"
	assert_success
	jq -e '.accepted == true and .reason == null and .format == 2
		and .object_format == "sha1" and (.refs | length) == 1
		and .refs[0].name == "refs/heads/aibox/task"
		and .prerequisites == [] and .pack.ok == true
		and (.pack.checksum | length) == 40 and .pack.objects > 0' <<<"$output"
	[ "$(jq -r '.refs[0].oid' <<<"$output")" = "$(oid task)" ]

	run --separate-stderr aibox-bundle-check --json --base "$(oid base)" "$F/good-v3-base.bundle"
	assert_success
	jq -e '.format == 3 and .pack == null' <<<"$output"
	[ "$(jq -r '.prerequisites[0].oid' <<<"$output")" = "$(oid base)" ]
	[ "$(jq -r '.prerequisites[0].comment' <<<"$output")" = "B: the task starts here" ]

	run --separate-stderr aibox-bundle-check --json --ref aibox/task "$F/two-refs.bundle"
	assert_equal "$status" 1
	jq -e '.accepted == false and .reason == "unexpected ref '"'"'refs/heads/main'"'"'"
		and (.refs | length) == 2' <<<"$output"

	run --separate-stderr aibox-bundle-check --json "$F/nul.bundle"
	assert_equal "$status" 1
	jq -e '.accepted == false and .refs == null and .format == 2
		and .reason == "line 2: NUL byte in header"' <<<"$output"
	run --separate-stderr aibox-bundle-check --json "$F/crlf.bundle"
	assert_equal "$status" 1
	jq -e '.accepted == false and .refs == null and .format == null' <<<"$output"

	run --separate-stderr aibox-bundle-check --json --pack "$F/bad-checksum.bundle"
	assert_equal "$status" 1
	jq -e '.pack.ok == false and .pack.reason == "pack: checksum mismatch"
		and .reason == "pack: checksum mismatch"' <<<"$output"
}

@test "bundle-check: usage and I/O errors exit 2" {
	run aibox-bundle-check
	assert_equal "$status" 2
	run aibox-bundle-check --frob "$F/good-v2.bundle"
	assert_equal "$status" 2
	run aibox-bundle-check --ref 'a..b' "$F/good-v2.bundle"
	assert_equal "$status" 2
	assert_output "aibox-bundle-check: invalid ref name 'a..b'"
	run aibox-bundle-check --base 1234 "$F/good-v2.bundle"
	assert_equal "$status" 2
	run aibox-bundle-check --repo . "$F/good-v2.bundle"
	assert_equal "$status" 2
	run aibox-bundle-check missing.bundle
	assert_equal "$status" 2
	assert_output "aibox-bundle-check: cannot open 'missing.bundle': No such file or directory"
	run aibox-bundle-check "$T"
	assert_equal "$status" 2
	run aibox-bundle-check --pack --repo "$T/nope" "$F/good-v2.bundle"
	assert_equal "$status" 2
	run aibox-bundle-check --help
	assert_success
	assert_output --partial "usage: aibox-bundle-check"
}

@test "bundle-check: refnames follow git's check-ref-format" {
	for good in HEAD refs/heads/aibox/task refs/tags/v1.0 refs/heads/a.b refs/heads/x@y; do
		[ "$(test-bundle refname "$good")" = ok ] || { echo "refused $good"; return 1; }
		[ "$(git check-ref-format "$good" && echo ok)" = ok ] || [ "$good" = HEAD ]
	done
	for bad in refs/heads/a..b refs/heads/.x refs/heads/x.lock refs/heads/x/ refs/heads//x \
		'refs/heads/a b' 'refs/heads/a~1' 'refs/heads/a^' 'refs/heads/a:b' 'refs/heads/a?' \
		'refs/heads/a*' 'refs/heads/a[' 'refs/heads/a\b' 'refs/heads/a@{1}' refs/heads/x. \
		refs/ main @ refs/heads/a.lock/b; do
		[ "$(test-bundle refname "$bad")" = bad ] || { echo "accepted $bad"; return 1; }
	done
}

@test "bundle-check: a ref name is checked by the broker's rule, printable ASCII only" {
	[ "$(test-bundle refname "$(printf 'refs/heads/\xc3\xa9')")" = bad ]
	[ "$(test-bundle refname refs/heads/plain)" = ok ]
}

@test "bundle-check: the header check reads only the header" {
	# A bundle with a 16 GiB pack (sparse): the header check reads one block.
	cp "$F/good-v2.bundle" big.bundle
	truncate -s 16G big.bundle || skip "no sparse files here"
	run test-bundle header big.bundle
	assert_success
	assert_line "version 2 sha1"
	assert_line "ref $(oid task) refs/heads/aibox/task"
	assert_line "pack at $(( $(head -2 "$F/good-v2.bundle" | wc -c) + 1 ))"
	assert_line "read 65536"
	# And so takes no longer than on the bundle alone (reading 16 GiB would).
	t0=$(date +%s%N)
	accepted --ref aibox/task "$F/good-v2.bundle"
	t1=$(date +%s%N)
	accepted --ref aibox/task big.bundle
	t2=$(date +%s%N)
	echo "small $(( (t1 - t0) / 1000000 )) ms, big $(( (t2 - t1) / 1000000 )) ms"
	[ $(( (t2 - t1) - (t1 - t0) )) -lt 1000000000 ]
}

@test "bundle-check: a ref whose tip the pack does not hold is refused, unless it is a base" {
	"$TOP/t/make-bundle-fixtures" --repo "$T/repo"
	refused "$F/tip-not-in-pack.bundle" "pack: does not hold $(oid root), a ref's tip" \
		--pack --repo repo --base "$(oid base)"
	# Without --pack only the header is read.
	accepted --base "$(oid base)" "$F/tip-not-in-pack.bundle"
	# No changes: the tip is the start commit, the pack empty.
	{
		printf '# v2 git bundle\n-%s\n%s refs/heads/aibox/task\n\n' "$(oid base)" "$(oid base)"
		printf 'PACK\0\0\0\2\0\0\0\0'
		printf 'PACK\0\0\0\2\0\0\0\0' | sha1sum | cut -c1-40 | xxd -r -p
	} >none.bundle
	accepted --pack --repo repo --base "$(oid base)" none.bundle
	# An empty pack holds no tip but a base.
	sed "s/^$(oid base) /$(oid root) /" none.bundle >other.bundle
	refused other.bundle "pack: does not hold $(oid root), a ref's tip" \
		--pack --repo repo --base "$(oid base)"
}

# checked FILE REASON [ARGS...]: refused with exactly REASON under --pack, and
# the checker's peak memory and CPU time (its own rusage, from --json) within
# the defaults' bound of 64 MiB (or MAX_RSS KiB) and 10 s.  A small sanitizer
# quarantine, so what is measured is the check's own memory, not memory freed
# and kept.
checked() {
	local file=$1 reason=$2 max_rss=${MAX_RSS:-$((64 * 1024))}
	shift 2
	ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=1 \
		run --separate-stderr aibox-bundle-check --pack --json "$@" "$file"
	echo "$stderr"
	jq -c .pack.checker <<<"$output"
	assert_equal "$stderr" "aibox-bundle-check: $file: $reason"
	assert_equal "$status" 1
	rss=$(jq .pack.checker.max_rss_kib <<<"$output")
	cpu=$(jq .pack.checker.cpu_s <<<"$output")
	[ "$rss" -gt 0 ] && [ "$rss" -lt "$max_rss" ]
	awk -v c="$cpu" 'BEGIN { exit !(c < 10) }'
}

@test "bundle-check: bundles that inflate to far more than their size are refused, within the bound" {
	mk() { "$TOP/t/make-bundle-fixtures" --bomb "$@"; }
	# 510 KiB: a blob of 512 MiB of zeros, and an OFS_DELTA on it
	mk ofs-delta 512 delta.bundle
	[ "$(stat -c %s delta.bundle)" -lt $((600 * 1024)) ]
	checked delta.bundle "pack: object 0: 536870912 bytes inflated, over the limit of 16777216 for one object (max-object)"
	# 1 MiB: a blob of 1 GiB
	mk blob 1024 blob.bundle
	checked blob.bundle "pack: object 0: 1073741824 bytes inflated, over the limit of 16777216 for one object (max-object)"
	# 300 blobs of 1 MiB, each under the limit for one object, not all of them
	mk many 300 many.bundle
	checked many.bundle "pack: more than 268435456 bytes inflated in all (max-inflated), at object 256"
	# a chain of deltas, each the whole of the one before: counted in all
	mk chain 15 chain.bundle
	checked chain.bundle "pack: more than 268435456 bytes inflated in all (max-inflated), at object 17"
	# the most memory within the caps: a delta of 16 MiB of inserted bytes on
	# a 16 MiB blob, libgit2 holding base, delta and result (55 MiB without a
	# sanitizer, docs/performance.md; ASan's shadow and redzones add a fifth)
	mk wide 16 wide.bundle
	MAX_RSS=$((80 * 1024)) checked wide.bundle "pack: does not hold $(printf '1%.0s' {1..40}), a ref's tip"
	# the limits can be lowered (and raised)
	checked delta.bundle "pack: object 0: 536870912 bytes inflated, over the limit of 1024 for one object (max-object)" \
		--limit max-object=1K
	checked many.bundle "pack: more than 1048576 bytes inflated in all (max-inflated), at object 1" \
		--limit max-inflated=1M
}

@test "bundle-check: the checker's CPU and wall-clock time are limited" {
	# 15 MiB and 256 deltas on it, each made and hashed once: about 3.6 GiB of
	# work within raised caps, several seconds: bounded by the rlimit
	"$TOP/t/make-bundle-fixtures" --bomb long 15 long.bundle
	checked long.bundle "the check used more than its limit of 1 s of CPU (cpu)" \
		--limit cpu=1 --limit max-inflated=4G
	awk -v c="$cpu" 'BEGIN { exit !(c < 3) }'
	t0=$(date +%s%N)
	checked long.bundle "the check took longer than its limit of 1 s (time)" \
		--limit time=1 --limit max-inflated=4G
	t1=$(date +%s%N)
	[ $(( (t1 - t0) / 1000000 )) -lt 5000 ]
}

@test "bundle-check: a delta chain deeper than the base cache is resolved, and a base let go is read again" {
	# A commit of 6 MiB (its message), 10 deltas each on the one before (66 MiB
	# of bases, more than the 16 MiB cache: the oldest are let go, memory stays
	# bounded), then a delta on the first, let go by then and read again: the
	# tip is that last delta's result, so a wrong base gives a wrong id
	"$TOP/t/make-bundle-fixtures" --bomb evict 6 evict.bundle
	ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=1 \
		run --separate-stderr aibox-bundle-check --pack --json evict.bundle
	jq -c .pack.checker <<<"$output"
	assert_equal "$stderr" ""
	assert_equal "$status" 0
	assert_equal "$(jq -r '[.accepted, .pack.objects] | @tsv' <<<"$output")" "$(printf 'true\t13')"
	rss=$(jq .pack.checker.max_rss_kib <<<"$output")
	# 25-31 MiB without a sanitizer, 74 MiB with no base let go; ASan adds about a fifth
	[ "$rss" -lt $((60 * 1024)) ]
}

@test "bundle-check: many small objects are checked in CPU time linear in their number" {
	# 200,000 blobs of a few bytes (3.5 MiB): each read once, in pack order (a
	# read per object, or a search per object, shows here: docs/performance.md
	# has 500,000 in 1.5 s).  A sanitizer build is slower: it gets 8 times the time.
	"$TOP/t/make-bundle-fixtures" --bomb tiny 200 tiny.bundle
	bound=1
	if ldd "$(command -v aibox-bundle-check)" | grep -q libasan; then bound=8; fi
	run --separate-stderr aibox-bundle-check --pack --json --limit cpu=$((bound * 3)) tiny.bundle
	jq -c .pack <<<"$output"
	assert_equal "$status" 0
	assert_equal "$(jq -r '[.accepted, .pack.objects] | @tsv' <<<"$output")" "$(printf 'true\t200002')"
	cpu=$(jq .pack.checker.cpu_s <<<"$output")
	awk -v c="$cpu" -v b="$bound" 'BEGIN { exit !(c < b) }'
}

@test "bundle-check: a large legitimate file and a change to it are accepted, within the bound" {
	git init -q -b aibox/task big
	head -c $((12 * 1024 * 1024)) /dev/urandom >big/data.bin
	git -C big add data.bin
	git -C big -c user.name=T -c user.email=t@example.com commit -q -m one
	echo more >>big/data.bin
	git -C big -c user.name=T -c user.email=t@example.com commit -q -am two
	git -C big bundle create -q "$T/big.bundle" aibox/task
	ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=1 \
		run --separate-stderr aibox-bundle-check --pack --json --ref aibox/task big.bundle
	jq -c .pack <<<"$output"
	assert_success
	# the second version is a delta on the first: libgit2 holds both (45 MiB
	# without a sanitizer, docs/performance.md; ASan's shadow and redzones add a
	# fifth, as for the wide bomb above: 67 MiB measured, so 80 MiB there)
	rss=$(jq .pack.checker.max_rss_kib <<<"$output")
	cpu=$(jq .pack.checker.cpu_s <<<"$output")
	bound=$((64 * 1024))
	if ldd "$(command -v aibox-bundle-check)" | grep -q libasan; then bound=$((80 * 1024)); fi
	[ "$rss" -lt "$bound" ]
	awk -v c="$cpu" 'BEGIN { exit !(c < 10) }'
	# and refused under a lower limit (git stores the newer version whole)
	run --separate-stderr aibox-bundle-check --pack --limit max-object=10M big.bundle
	assert_equal "$status" 1
	[[ "$stderr" =~ ^"aibox-bundle-check: big.bundle: pack: object "[0-9]+": 12582917 bytes inflated, over the limit of 10485760 for one object (max-object)"$ ]]
}

@test "bundle-check: --limit takes known names and sizes, with --pack" {
	run aibox-bundle-check --pack --limit frob=1 "$F/good-v2.bundle"
	assert_equal "$status" 2
	assert_output --partial "unknown limit 'frob'"
	run aibox-bundle-check --pack --limit max-object=lots "$F/good-v2.bundle"
	assert_equal "$status" 2
	assert_output "aibox-bundle-check: --limit: max-object: 'lots' is not a size"
	run aibox-bundle-check --pack --limit cpu=0 "$F/good-v2.bundle"
	assert_equal "$status" 2
	run aibox-bundle-check --limit cpu=5 "$F/good-v2.bundle"
	assert_equal "$status" 2
	accepted --pack --limit max-object=1G,max-inflated=1G,memory=512M,cpu=20,time=30 \
		"$F/good-v2.bundle"
}

@test "bundle-check: size limits take the one size grammar: bytes without a unit, K to T" {
	accepted --pack --limit max-object=16384K,max-inflated=1T,memory=268435456 "$F/good-v2.bundle"
	accepted --pack --limit max-inflated=1TiB "$F/good-v2.bundle"
	run aibox-bundle-check --pack --limit max-object=5G "$F/good-v2.bundle"
	assert_equal "$status" 2
	assert_output "aibox-bundle-check: --limit: max-object: '5G' is not a size"
	run aibox-bundle-check --pack --limit max-inflated=1tb "$F/good-v2.bundle"
	assert_equal "$status" 2
}

@test "bundle-check: the checker's address space is limited (not in a sanitizer build)" {
	if ldd "$(command -v aibox-bundle-check)" | grep -q libasan; then
		skip "a sanitizer build sets no address-space limit (ASan's shadow takes terabytes)"
	fi
	# 16 MiB of base, delta and result: about 55 MiB, more than 20 MiB
	"$TOP/t/make-bundle-fixtures" --bomb wide 16 wide.bundle
	refused wide.bundle "pack: the check ran out of memory (memory)" --pack --limit memory=20M
}

# A repository r for hostile commits, made with git's plumbing, which checks nothing.
hostile_repo() {
	export GIT_AUTHOR_NAME=T GIT_AUTHOR_EMAIL=t@example.com GIT_COMMITTER_NAME=T
	export GIT_COMMITTER_EMAIL=t@example.com GIT_AUTHOR_DATE=1700000000 GIT_COMMITTER_DATE=1700000000
	git init -q -b main r
	blob=$(printf 'x\n' | git -C r hash-object -w --stdin)
}

# raw_tree MODE NAME OID [MODE NAME OID]...: a tree of exactly these entries in this
# order (the mode as written, names as bytes with printf escapes); prints its id.
raw_tree() {
	python3 -c 'import sys
a = sys.argv[1:]
out = b""
for i in range(0, len(a), 3):
    name = a[i + 1].encode().decode("unicode_escape").encode("latin-1")
    out += a[i].encode() + b" " + name + b"\0" + bytes.fromhex(a[i + 2])
sys.stdout.buffer.write(out)' "$@" | git -C r hash-object --literally -t tree -w --stdin
}

# bundle_of NAME OBJECT: NAME.bundle, aibox/task at a commit of the tree OBJECT (or at
# OBJECT, a commit).
bundle_of() {
	local c=$2
	[ "$(git -C r cat-file -t "$c")" = commit ] || c=$(git -C r commit-tree "$2" -m hostile)
	git -C r update-ref refs/heads/aibox/task "$c"
	git -C r bundle create -q "$T/$1.bundle" aibox/task 2>/dev/null
}

# one_object NAME TYPE HEX: NAME.bundle of a pack of one object of TYPE (a number) and
# the data HEX, aibox/task at it; its id in NAME.id.
one_object() {
	python3 - "$@" <<'PY'
import hashlib, struct, sys, zlib
name, t, data = sys.argv[1], int(sys.argv[2]), bytes.fromhex(sys.argv[3])
kind = {1: b"commit", 2: b"tree", 3: b"blob", 4: b"tag"}[t]
oid = hashlib.sha1(kind + b" %d\0" % len(data) + data).hexdigest()
size, head = len(data), bytearray()
b = (t << 4) | (size & 15)
size >>= 4
while size:
    head.append(b | 0x80)
    b = size & 0x7f
    size >>= 7
head.append(b)
pack = b"PACK" + struct.pack(">II", 2, 1) + bytes(head) + zlib.compress(data)
pack += hashlib.sha1(pack).digest()
open(name + ".bundle", "wb").write(b"# v2 git bundle\n" + oid.encode() + b" refs/heads/aibox/task\n\n" + pack)
open(name + ".id", "w").write(oid)
PY
}

# fsck_refused NAME ID REASON [git|git-notes|git-parse]: NAME.bundle refused under
# --pack, naming the object ID and REASON; with "git", git fsck --strict of r (which
# checks every object r holds) refuses the same object with the same message id;
# with "git-notes", git only notes it (a warning); with "git-parse", git refuses the
# object before its fsck sees it ("bogus commit object", "could not be parsed").
fsck_refused() {
	local msgid=${3##*(} want
	refused "$1.bundle" "pack: object $2: $3" --pack
	case ${4:-} in
	git) want="error in [a-z]+ $2: ${msgid%)}: " ;;
	git-notes) want="warning in [a-z]+ $2: ${msgid%)}: " ;;
	git-parse) want="error: (bogus [a-z]+ object |Object )?$2" ;;
	*) want= ;;
	esac
	if [ -n "$want" ]; then
		run git -C r fsck --strict --no-dangling
		assert_equal "$status" 1
		assert_output --regexp "$want"
	fi
	git -C r update-ref -d refs/heads/aibox/task
}

# hand_object NAME TYPE TEXT: NAME.bundle of a pack of one object of TYPE (a number)
# made of TEXT (printf escapes), aibox/task at it; the same object in r, for git
# fsck.  Its id in NAME.id.
hand_object() {
	local kind
	kind=$(case $2 in 1) echo commit ;; 2) echo tree ;; 4) echo tag ;; esac)
	one_object "$1" "$2" "$(printf "$3" | xxd -p | tr -d '\n')"
	printf "$3" | git -C r hash-object --literally -t "$kind" -w --stdin >/dev/null
}

# objects_bundle NAME TIP OBJECT...: NAME.bundle of a pack of exactly these objects of
# r (git pack-objects, which checks nothing), aibox/task at TIP.
objects_bundle() {
	local name=$1 tip=$2
	shift 2
	{
		printf '# v2 git bundle\n%s refs/heads/aibox/task\n\n' "$tip"
		printf '%s\n' "$@" | git -C r pack-objects -q --stdout
	} >"$name.bundle"
}

@test "bundle-check: a .gitmodules git fsck refuses is refused: option-like url and path, '..', newlines, commands" {
	hostile_repo
	while IFS='|' read -r text reason; do
		printf '%b' "$text" >r/.gitmodules
		id=$(git -C r hash-object -w .gitmodules)
		bundle_of gm "$(raw_tree 100644 .gitmodules "$id")"
		fsck_refused gm "$id" "$reason" git
	done <<'CASES'
[submodule "x"]\n\tpath = x\n\turl = --upload-pack=touch /tmp/pwned\n|.gitmodules: the url '--upload-pack=touch /tmp/pwned' is not allowed (gitmodulesUrl)
[submodule "x"]\n\tpath = --x\n\turl = https://example.com/x.git\n|.gitmodules: the path '--x' is not allowed (gitmodulesPath)
[submodule "../../hooks"]\n\tpath = x\n|.gitmodules: the submodule name '../../hooks' is not allowed (gitmodulesName)
[submodule "a\\\\\\\\.."]\n\tpath = x\n|.gitmodules: the submodule name 'a\\..' is not allowed (gitmodulesName)
[submodule "x"]\n\turl = ./x%0ahost=evil.example.com\n|.gitmodules: the url './x%0ahost=evil.example.com' is not allowed (gitmodulesUrl)
[submodule "x"]\n\turl = ../:evil.example.com/x\n|.gitmodules: the url '../:evil.example.com/x' is not allowed (gitmodulesUrl)
[submodule "x"]\n\turl = https://user@/x.git\n|.gitmodules: the url 'https://user@/x.git' is not allowed (gitmodulesUrl)
[submodule "x"]\n\turl = "--up\\\nload-pack=x"\n|.gitmodules: the url '--upload-pack=x' is not allowed (gitmodulesUrl)
[submodule "x"]\n\tupdate = !sh -c pwned\n|.gitmodules: an update command is not allowed (gitmodulesUpdate)
[submodule.x]\n\tURL = -u\n|.gitmodules: the url '-u' is not allowed (gitmodulesUrl)
CASES
	# URLs for git's curl transport that newer git's fsck (2.45 on, url_normalize())
	# refuses and git 2.39 here does not: a bad port, host or %-escape, '..' above /.
	for url in https://example.com:99999/x https://example.com:0/x 'https://exa mple.com/x' \
		https://example.com/%zz 'http::https://example.com/../../x' https://u%4@example.com/x; do
		printf '[submodule "x"]\n\turl = %s\n' "$url" >r/.gitmodules
		id=$(git -C r hash-object -w .gitmodules)
		bundle_of gm "$(raw_tree 100644 .gitmodules "$id")"
		fsck_refused gm "$id" ".gitmodules: the url '$url' is not allowed (gitmodulesUrl)"
	done
	# Under any name git takes for .gitmodules: case, NTFS short name, HFS+ ignorables.
	printf '[submodule "x"]\n\turl = --x\n' >r/.gitmodules
	id=$(git -C r hash-object -w .gitmodules)
	for name in .GITMODULES GITMOD~1 '.gitmodules. ' '.git\xe2\x80\x8cmodules' 'a\\.gitmodules'; do
		bundle_of gm "$(raw_tree 100644 "$name" "$id")"
		fsck_refused gm "$id" ".gitmodules: the url '--x' is not allowed (gitmodulesUrl)"
	done
	# One that does not parse as git config (git notes it only): a subsection
	# after a newline, an unclosed section.
	for text in '[submodule "x"\n\turl = a\n' '[submodule\n"x"]\n\turl = a\n'; do
		printf "$text" >r/.gitmodules
		id=$(git -C r hash-object -w .gitmodules)
		bundle_of gm "$(raw_tree 100644 .gitmodules "$id")"
		fsck_refused gm "$id" ".gitmodules does not parse as git config (gitmodulesParse)" git-notes
	done
}

@test "bundle-check: a .gitmodules from the project, one that is no blob, or one found nowhere is checked as git checks it" {
	hostile_repo
	# The project holds a file that would be a hostile .gitmodules (a test's fixture,
	# say); the task names it .gitmodules: git reads it from the repository and
	# refuses, and so does the check with --repo.
	printf '[submodule "x"]\n\turl = --upload-pack=touch /tmp/pwned\n' >r/fixture.txt
	git -C r add fixture.txt
	git -C r commit -q -m fixture
	base=$(git -C r rev-parse HEAD)
	id=$(git -C r rev-parse HEAD:fixture.txt)
	c=$(git -C r commit-tree "$(raw_tree 100644 .gitmodules "$id" 100644 fixture.txt "$id")" -p "$base" -m t)
	git -C r update-ref refs/heads/aibox/task "$c"
	git -C r bundle create -q "$T/thin.bundle" main..aibox/task 2>/dev/null
	refused thin.bundle "pack: object $id: .gitmodules: the url '--upload-pack=touch /tmp/pwned' is not allowed (gitmodulesUrl)" \
		--pack --repo r --base "$base"
	run git -C r fsck --strict --no-dangling
	assert_output --partial "gitmodulesUrl: "
	assert_equal "$status" 1
	git -C r update-ref -d refs/heads/aibox/task
	# A .gitmodules that is a tree.
	sub=$(raw_tree 100644 f "$blob")
	tree=$(raw_tree 100644 .gitmodules "$sub")
	c=$(git -C r commit-tree "$tree" -m t)
	objects_bundle gm "$c" "$c" "$tree" "$sub" "$blob"
	fsck_refused gm "$sub" ".gitmodules is not a blob (gitmodulesBlob)" git
	# One that is in neither the pack nor the repository.
	missing=4242424242424242424242424242424242424242
	hand_object gm 2 "100644 .gitmodules\0$(printf '\\x42%.0s' {1..20})"
	fsck_refused gm "$missing" ".gitmodules is not in the pack or the repository (gitmodulesMissing)" git
	hand_object gm 2 "100644 .gitattributes\0$(printf '\\x42%.0s' {1..20})"
	refused gm.bundle "pack: object $missing: .gitattributes is not in the pack or the repository (gitattributesMissing)" --pack --repo r
}

@test "bundle-check: a tree entry that is .git in any spelling is refused" {
	hostile_repo
	for name in .git .GIT .Git GIT~1 git~1 '.git.' '.git ' '.git. . .' '.git::$INDEX_ALLOCATION' \
		'.g\xe2\x80\x8cit' '\xef\xbb\xbf.git' '.gi\xe2\x80\xaet' 'a\\.git' 'a\\git~1\\b'; do
		tree=$(raw_tree 40000 "$name" "$(raw_tree 100644 f "$blob")")
		bundle_of dotgit "$tree"
		shown=$(printf '%b' "$name" | LC_ALL=C tr -c ' -~' '?')
		fsck_refused dotgit "$tree" "tree: the entry '$shown' is '.git' (hasDotgit)" git
	done
}

@test "bundle-check: bad and zero-padded modes are refused" {
	hostile_repo
	sub=$(raw_tree 100644 f "$blob")
	tree=$(raw_tree 40000 a "$sub" 040000 d "$sub")
	bundle_of mode "$tree"
	fsck_refused mode "$tree" "tree: the entry 'd' has a zero-padded mode (zeroPaddedFilemode)" git
	for mode in 100664 100600 100777 120644 0100644; do
		tree=$(raw_tree "$mode" f "$blob")
		bundle_of mode "$tree"
		reason="tree: the entry 'f' has the bad mode ${mode#0} (badFilemode)"
		[ "$mode" != 0100644 ] || reason="tree: the entry 'f' has a zero-padded mode (zeroPaddedFilemode)"
		fsck_refused mode "$tree" "$reason" "$([ "$mode" = 0100644 ] && echo git || echo git-notes)"
	done
	one_object mode 2 "$(printf '10064x f\0' | xxd -p)$(git -C r rev-parse "$blob")"
	fsck_refused mode "$(cat mode.id)" "tree: an entry's mode is not octal (badTree)"
}

@test "bundle-check: symbolic links named .gitmodules, .gitattributes, .gitignore, .mailmap are refused" {
	hostile_repo
	while IFS='|' read -r name what id; do
		tree=$(raw_tree 120000 "$name" "$blob")
		bundle_of link "$tree"
		# git refuses a .gitmodules link, and only notes the others
		fsck_refused link "$tree" "tree: the entry '$name' is a symbolic link named $what (${id}Symlink)" \
			"$([ "$id" = gitmodules ] && echo git || echo git-notes)"
	done <<'CASES'
.gitmodules|.gitmodules|gitmodules
.GitModules|.gitmodules|gitmodules
GI7EBA~1|.gitmodules|gitmodules
.gitattributes|.gitattributes|gitattributes
GITATT~2|.gitattributes|gitattributes
.gitignore|.gitignore|gitignore
.mailmap|.mailmap|mailmap
CASES
}

@test "bundle-check: unsorted trees, duplicates and bad entries are refused" {
	hostile_repo
	sub=$(raw_tree 100644 f "$blob")
	check() { # check REASON ENTRIES...
		local reason=$1 tree
		shift
		tree=$(raw_tree "$@")
		bundle_of tree "$tree"
		fsck_refused tree "$tree" "$reason" git
	}
	check "tree: not sorted (treeNotSorted)" 100644 b "$blob" 100644 a "$blob"
	check "tree: the entry 'a' is there twice (duplicateEntries)" 100644 a "$blob" 100644 a "$blob"
	check "tree: the entry 'a' is there twice (duplicateEntries)" \
		100644 a "$blob" 100644 a.b "$blob" 40000 a "$sub"
	check "tree: the entry '.' is '.' (hasDot)" 40000 . "$sub"
	check "tree: the entry '..' is '..' (hasDotdot)" 40000 .. "$sub"
	check "tree: the entry 'a/b' holds '/' (fullPathname)" 100644 a/b "$blob"
	check "tree: the entry 'a' points at the null id (nullSha1)" \
		160000 a 0000000000000000000000000000000000000000
	# A name longer than 4096 bytes: newer git's fsck warns (largePathname, an
	# error under --strict); git 2.39 here does not know it.
	long=$(printf 'a%.0s' {1..4097})
	tree=$(raw_tree 100644 "$long" "$blob")
	bundle_of tree "$tree"
	fsck_refused tree "$tree" "tree: the entry '$(printf 'a%.0s' {1..64})...' is longer than 4096 bytes (largePathname)"
	tree=$(raw_tree 100644 "${long%a}" "$blob")
	bundle_of tree "$tree"
	accepted --pack tree.bundle
	git -C r update-ref -d refs/heads/aibox/task
	# git cannot bundle a tree it cannot read: these are packed by hand.
	one_object tree 2 "$(printf '100644 \0' | xxd -p)$(git -C r rev-parse "$blob")"
	fsck_refused tree "$(cat tree.id)" "tree: an entry has an empty name (badTree)"
	one_object tree 2 "$(printf '100644 a\0abc' | xxd -p)"
	fsck_refused tree "$(cat tree.id)" "tree: an entry is cut short (badTree)"
}

@test "bundle-check: commits and tags with bad headers are refused" {
	hostile_repo
	tree=$(raw_tree 100644 f "$blob")
	while IFS='|' read -r text reason; do
		c=$(printf "$text" "$tree" | git -C r hash-object --literally -t commit -w --stdin)
		bundle_of commit "$c"
		fsck_refused commit "$c" "commit: $reason" git
	done <<'CASES'
tree %s\ncommitter T <t@x> 1 +0000\n\nm\n|no 'author' line (missingAuthor)
tree %s\nauthor T <t@x> 1 +0000\nauthor T <t@x> 1 +0000\ncommitter T <t@x> 1 +0000\n\nm\n|more than one 'author' line (multipleAuthors)
tree %s\nauthor T <t@x> 1 +0000\n\nm\n|no 'committer' line (missingCommitter)
tree %s\nauthor T t@x> 1 +0000\ncommitter T <t@x> 1 +0000\n\nm\n|author: bad name (badName)
tree %s\nauthor T <t@x 1 +0000\ncommitter T <t@x> 1 +0000\n\nm\n|author: bad email (badEmail)
tree %s\nauthor T<t@x> 1 +0000\ncommitter T <t@x> 1 +0000\n\nm\n|author: no space before the email (missingSpaceBeforeEmail)
tree %s\nauthor T <t@x> 01 +0000\ncommitter T <t@x> 1 +0000\n\nm\n|author: zero-padded date (zeroPaddedDate)
tree %s\nauthor T <t@x> 99999999999999999999 +0000\ncommitter T <t@x> 1 +0000\n\nm\n|author: the date overflows (badDateOverflow)
tree %s\nauthor T <t@x> 1 +00000\ncommitter T <t@x> 1 +0000\n\nm\n|author: bad time zone (badTimezone)
tree %s\nauthor T <t@x> 1 +0000\ncommitter T <t@x> x +0000\n\nm\n|committer: bad date (badDate)
tree %s\nauthor T <t@x> 1 +0000\ncommitter T <t@x> 1 +0000\n\nm\0x\n|NUL byte in the commit (nulInCommit)
tree %s\nauthor T <t@x> 1 +0000\ncommitter\0T <t@x> 1 +0000\n\nm\n|NUL byte in the header (nulInHeader)
CASES
	# git cannot bundle a commit whose parent it cannot read: packed by hand.
	one_object commit 1 "$(printf 'tree %s\nparent 123\nauthor T <t@x> 1 +0000\ncommitter T <t@x> 1 +0000\n\nm\n' "$tree" | xxd -p | tr -d '\n')"
	fsck_refused commit "$(cat commit.id)" "commit: bad 'parent' line (badParentSha1)"
	# Headers git cannot walk: packed by hand (and written into r for git fsck).
	while IFS='|' read -r text reason how; do
		hand_object commit 1 "$(printf "$text" "$tree")"
		fsck_refused commit "$(cat commit.id)" "commit: $reason" "$how"
	done <<'CASES'
author T <t@x> 1 +0000\ncommitter T <t@x> 1 +0000\n\nm\n|no 'tree' line (missingTree)|git-parse
tree 12345\nauthor T <t@x> 1 +0000\ncommitter T <t@x> 1 +0000\n\nm\n|bad 'tree' line (badTreeSha1)|git-parse
tree %s\nauthor T <t@x> 1 +0000\ncommitter T <t@x> 1 +0000|unterminated header (unterminatedHeader)|git
tree %s\nauthor T 1 +0000\ncommitter T <t@x> 1 +0000\n\nm\n|author: no email (missingEmail)|git
tree %s\nauthor <t@x> 1 +0000\ncommitter T <t@x> 1 +0000\n\nm\n|author: no name before the email (missingNameBeforeEmail)|git
tree %s\nauthor T <t@x>1 +0000\ncommitter T <t@x> 1 +0000\n\nm\n|author: no space before the date (missingSpaceBeforeDate)|git
tree %s\nauthor T <t@x> 1 +0000\ncommitter T <t@x> 9223372036854775808 +0000\n\nm\n|committer: the date overflows (badDateOverflow)|git
CASES
	while IFS='|' read -r text reason how; do
		hand_object tag 4 "$(printf "$text" "$tree")"
		fsck_refused tag "$(cat tag.id)" "tag: $reason" "$how"
	done <<'CASES'
type tree\ntag v1\ntagger T <t@x> 1 +0000\n\nm\n|no 'object' line (missingObject)|git-parse
object 123\ntype tree\ntag v1\ntagger T <t@x> 1 +0000\n\nm\n|bad 'object' line (badObjectSha1)|git-parse
object %s\ntag v1\ntagger T <t@x> 1 +0000\n\nm\n|no 'type' line (missingTypeEntry)|git-parse
object %s\ntype tree\ntagger T <t@x> 1 +0000\n\nm\n|no 'tag' line (missingTagEntry)|git-parse
object %s\ntype tree\ntag v1\ntagger T <t@x 1 +0000\n\nm\n|tagger: bad email (badEmail)|git
object %s\ntype tree\ntag v1\ntagger T <t@x> 1 +00x0\n\nm\n|tagger: bad time zone (badTimezone)|git
CASES
	# A tag whose type is none of git's (git will not point a ref at it): packed by hand.
	one_object tag 4 "$(printf 'object %s\ntype frob\ntag v1\ntagger T <t@x> 1 +0000\n\nm\n' "$tree" | xxd -p | tr -d '\n')"
	refused tag.bundle "pack: object $(cat tag.id): tag: bad 'type' (badType)" --pack
}

@test "bundle-check: a .gitattributes with a line too long for git is refused" {
	hostile_repo
	python3 -c 'print("*.c " + "a" * 3000)' >r/.gitattributes
	id=$(git -C r hash-object -w .gitattributes)
	bundle_of attr "$(raw_tree 100644 .gitattributes "$id")"
	fsck_refused attr "$id" ".gitattributes has a line of 2048 bytes or more (gitattributesLineLength)" git
}

@test "bundle-check: what git fsck --strict accepts is accepted: submodules, odd but valid names" {
	hostile_repo
	printf '[submodule "lib/x"]\n\tpath = lib/x\n\turl = https://example.com/x.git\n[submodule "y"]\n\turl = ../y.git\n\tupdate = rebase\n' >r/.gitmodules
	gm=$(git -C r hash-object -w .gitmodules)
	printf '* text=auto\n' >r/.gitattributes
	ga=$(git -C r hash-object -w .gitattributes)
	sub=$(raw_tree 100644 f "$blob")
	tree=$(raw_tree 100644 .gitattributes "$ga" 40000 .github "$sub" 100644 .gitmodules "$gm" \
		100644 .gitx "$blob" 100755 a "$blob" 100644 a.b "$blob" 40000 a0 "$sub" \
		120000 git "$blob" 160000 sub "$(git -C r commit-tree "$sub" -m s)" 100644 '\xc3\xa9' "$blob")
	c=$(git -C r commit-tree "$tree" -m ok)
	# Dates as git takes them: blanks before, the largest time_t.
	c=$(printf 'tree %s\nparent %s\nauthor T <t@x> \t 1 +0000\ncommitter T <t@x> 9223372036854775807 +0000\n\nm\n' \
		"$tree" "$c" | git -C r hash-object -t commit -w --stdin)
	git -C r fsck --strict --no-dangling
	bundle_of ok "$c"
	accepted --pack --ref aibox/task ok.bundle
}

# git fsck checks what a commit, a tree and a tag name against the named object's type
# ("bad tree pointer", "bad parent", "bad tag pointer", "is a tree, not a blob"). git
# fetch keeps every object of the pack, reachable or not, and its connectivity check
# does not look at types: such a bundle is fetched, and the repository then fails fsck.
@test "bundle-check: a commit, tree or tag that names an object of the pack or the project as another type is refused" {
	hostile_repo
	tree=$(raw_tree 100644 f "$blob")
	good=$(git -C r commit-tree "$tree" -m good)
	# bundle_with NAME TIP OBJECT...: NAME.bundle, aibox/task at TIP, a pack of the objects.
	bundle_with() { objects_bundle "$@"; }
	tag=$(printf 'object %s\ntype commit\ntag v1\ntagger T <t@x> 1 +0000\n\nm\n' "$blob" |
		git -C r hash-object --literally -t tag -w --stdin)
	bundle_with tagbad "$good" "$good" "$tree" "$blob" "$tag"
	# the user's side: the fetch succeeds and git fsck then refuses the repository
	git init -q u
	git -C u fetch -q "$PWD/tagbad.bundle" aibox/task:aibox/task
	run git -C u fsck --strict
	assert_failure
	assert_output --partial "bad tag pointer to $blob in $tag"
	refused tagbad.bundle "pack: object $tag: names $blob as a commit, but it is a blob (badTagPointer)" --pack
	c=$(printf 'tree %s\nauthor T <t@x> 1 +0000\ncommitter T <t@x> 1 +0000\n\nm\n' "$blob" |
		git -C r hash-object --literally -t commit -w --stdin)
	bundle_with treebad "$good" "$good" "$tree" "$blob" "$c"
	refused treebad.bundle "pack: object $c: names $blob as a tree, but it is a blob (badTreePointer)" --pack
	c=$(printf 'tree %s\nparent %s\nauthor T <t@x> 1 +0000\ncommitter T <t@x> 1 +0000\n\nm\n' "$tree" "$tree" |
		git -C r hash-object --literally -t commit -w --stdin)
	bundle_with parentbad "$good" "$good" "$tree" "$blob" "$c"
	refused parentbad.bundle "pack: object $c: names $tree as a commit, but it is a tree (badParentPointer)" --pack
	# a tree entry: a file whose id is a tree of the pack. The fetch succeeds, git fsck
	# of the user's repository then refuses it, and a checkout writes the tree's bytes.
	t2=$(raw_tree 100644 d "$tree" 100644 f "$blob")
	c=$(git -C r commit-tree "$t2" -m x)
	bundle_with entrybad "$c" "$c" "$t2" "$tree" "$blob"
	git init -q u2
	git -C u2 fetch -q "$PWD/entrybad.bundle" aibox/task:aibox/task
	run git -C u2 fsck --strict
	assert_failure
	assert_output --regexp "object $tree is a (tree, not a blob|blob, not a tree)"
	refused entrybad.bundle "pack: object $t2: names $tree as a blob, but it is a tree (badTreeEntry)" --pack
	t2=$(raw_tree 40000 d "$blob")
	bundle_with entrybad "$(git -C r commit-tree "$t2" -m x)" "$(git -C r commit-tree "$t2" -m x)" "$t2" "$blob"
	refused entrybad.bundle "pack: object $t2: names $blob as a tree, but it is a blob (badTreeEntry)" --pack
	# a link to the project's object (not in the pack): its type is read from --repo
	base=$(git -C r commit-tree "$tree" -m base)
	t3=$(raw_tree 100644 f "$(printf 'y\n' | git -C r hash-object -w --stdin)")
	c=$(git -C r commit-tree "$t3" -p "$base" -m next)
	bad=$(printf 'tree %s\nparent %s\nauthor T <t@x> 1 +0000\ncommitter T <t@x> 1 +0000\n\nm\n' "$t3" "$tree" |
		git -C r hash-object --literally -t commit -w --stdin)
	{
		printf '# v2 git bundle\n-%s\n%s refs/heads/aibox/task\n\n' "$base" "$c"
		printf '%s\n' "$c" "$t3" "$(git -C r rev-parse "$t3:f")" "$bad" | git -C r pack-objects -q --stdout
	} >repobad.bundle
	refused repobad.bundle "pack: object $bad: names $tree as a commit, but it is a tree (badParentPointer)" \
		--pack --repo r --base "$base"
	accepted --pack --repo r --base "$base" "$({
		printf '# v2 git bundle\n-%s\n%s refs/heads/aibox/task\n\n' "$base" "$c"
		printf '%s\n' "$c" "$t3" "$(git -C r rev-parse "$t3:f")" | git -C r pack-objects -q --stdout
	} >repook.bundle; echo repook.bundle)"
	# a submodule's commit is another repository's: any id, not checked
	t2=$(raw_tree 100644 f "$blob" 160000 s "$blob")
	c=$(git -C r commit-tree "$t2" -m x)
	accepted --pack --ref aibox/task "$(objects_bundle ok "$c" "$c" "$t2" "$blob"; echo ok.bundle)"
	accepted --pack --ref aibox/task "$(objects_bundle ok "$good" "$good" "$tree" "$blob"; echo ok.bundle)"
}

@test "bundle-check: an object the pack names that neither the pack nor the project holds is refused" {
	hostile_repo
	tree=$(raw_tree 100644 f "$blob")
	base=$(git -C r commit-tree "$tree" -m base)
	git -C r branch base "$base"
	# the project: base and what it names, nothing else of r's
	git clone -q --bare --no-local --single-branch -b base r p
	# thin NAME OBJECT...: NAME.bundle on top of base, aibox/task at the first object
	thin() {
		local name=$1
		shift
		{
			printf '# v2 git bundle\n-%s\n%s refs/heads/aibox/task\n\n' "$base" "$1"
			printf '%s\n' "$@" | git -C r pack-objects -q --stdout
		} >"$name.bundle"
	}
	new=$(printf 'new\n' | git -C r hash-object -w --stdin)
	t2=$(raw_tree 100644 f "$blob" 100644 g "$new")
	c=$(git -C r commit-tree "$t2" -p "$base" -m next)
	# a tree's blob in neither
	thin noblob "$c" "$t2"
	refused noblob.bundle "pack: object $t2: names $new, a blob neither the pack nor the project holds (missing)" \
		--pack --repo p --base "$base"
	# the user's side: git fetch refuses it too, having been told it was checked
	git clone -q --no-local p u
	run git -C u fetch -q "$PWD/noblob.bundle" aibox/task:aibox/task
	assert_failure
	# a commit's tree, and its parent
	thin notree "$c"
	refused notree.bundle "pack: object $c: names $t2, a tree neither the pack nor the project holds (missing)" \
		--pack --repo p --base "$base"
	mid=$(git -C r commit-tree "$tree" -p "$base" -m mid)
	c2=$(git -C r commit-tree "$tree" -p "$mid" -m after)
	thin noparent "$c2"
	refused noparent.bundle "pack: object $c2: names $mid, a commit neither the pack nor the project holds (missing)" \
		--pack --repo p --base "$base"
	# with every object: accepted; without the project to look in, nothing is known missing
	thin whole "$c" "$t2" "$new"
	accepted --pack --repo p --base "$base" whole.bundle
	git -C u fetch -q "$PWD/whole.bundle" aibox/task:aibox/task
	accepted --pack --base "$base" noblob.bundle
}

# git writes only a commit to a branch (HEAD or a ref under refs/heads/): the fetch of a
# bundle whose branch names a tree, a blob or a tag fails ("trying to write non-commit
# object"), an annotated tag of a commit too (git does not peel it). The result is fetched
# into a branch, so the check refuses them, after every other check. A tag ref may name
# any object.
@test "bundle-check: a branch whose tip is a tree, a blob or a tag, even of a commit, is refused, naming the type" {
	hostile_repo
	tree=$(raw_tree 100644 f "$blob")
	c=$(git -C r commit-tree "$tree" -m c)
	tag=$(printf 'object %s\ntype commit\ntag v1\ntagger T <t@x> 1 +0000\n\nm\n' "$c" |
		git -C r hash-object -t tag -w --stdin)
	git init -q u
	for tip in "tree $tree" "blob $blob" "tag $tag"; do
		set -- $tip
		objects_bundle tip "$2" "$c" "$tree" "$blob" "$tag"
		# the user's side: git refuses the fetch
		run git -C u fetch -q "$PWD/tip.bundle" aibox/task:aibox/task
		assert_failure
		assert_output --partial "trying to write non-commit object $2 to branch"
		refused tip.bundle "pack: ref 'refs/heads/aibox/task' names a $1, not a commit ($2)" \
			--pack --ref aibox/task
		# without --pack only the header is read
		accepted --ref aibox/task tip.bundle
	done
	{
		printf '# v2 git bundle\n%s HEAD\n\n' "$tree"
		printf '%s\n' "$tree" "$blob" | git -C r pack-objects -q --stdout
	} >head.bundle
	refused head.bundle "pack: ref 'HEAD' names a tree, not a commit ($tree)" --pack
	# A thin pack's base from --repo as the tip: its type is read there. (A delta on
	# the blob of r, adding a byte.)
	python3 - "$blob" <<'PY'
import hashlib, struct, sys, zlib
base = bytes.fromhex(sys.argv[1])
delta = bytes([2, 3, 0x90, 2, 1]) + b"y"  # sizes 2 and 3: copy 2 bytes, insert "y"
pack = b"PACK" + struct.pack(">II", 2, 1) + bytes([0x70 | len(delta)]) + base + zlib.compress(delta)
pack += hashlib.sha1(pack).digest()
open("thin.bundle", "wb").write(b"# v2 git bundle\n%s refs/heads/aibox/task\n\n" % sys.argv[1].encode() + pack)
PY
	refused thin.bundle "pack: ref 'refs/heads/aibox/task' names a blob, not a commit ($blob)" \
		--pack --repo r
	# A tag may name any object: git fetches it into refs/tags.
	{
		printf '# v2 git bundle\n%s refs/tags/v1\n%s refs/tags/t\n\n' "$tag" "$tree"
		printf '%s\n' "$c" "$tree" "$blob" "$tag" | git -C r pack-objects -q --stdout
	} >tags.bundle
	accepted --pack tags.bundle
	git -C u fetch -q "$PWD/tags.bundle" 'refs/tags/*:refs/tags/*'
	# The commit: accepted, and fetched.
	objects_bundle ok "$c" "$c" "$tree" "$blob"
	accepted --pack --ref aibox/task ok.bundle
	git -C u fetch -q "$PWD/ok.bundle" aibox/task:aibox/task
	[ "$(git -C u rev-parse aibox/task)" = "$c" ]
}
