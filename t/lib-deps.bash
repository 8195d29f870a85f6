# Packages for a loopback registry (t/dep-registry): `load lib-deps`.

# Debian's python3 (packages.txt): a pyenv shim on PATH costs seconds a call.
PY=python3
[ ! -x /usr/bin/python3 ] || PY=/usr/bin/python3

# make_npm_tgz DIR NAME VERSION: a package tarball as npm makes them (package/...).
make_npm_tgz() {
	local d
	d=$(mktemp -d) || return 1
	mkdir "$d/package"
	printf '{"name": "%s", "version": "%s", "main": "index.js"}\n' "$2" "$3" >"$d/package/package.json"
	printf 'module.exports = "%s %s";\n' "$2" "$3" >"$d/package/index.js"
	tar -C "$d" -czf "$1/$2-$3.tgz" package || return 1
	rm -rf "$d"
}

# make_wheel DIR NAME VERSION: a minimal pure-Python wheel.
make_wheel() {
	"$PY" - "$@" <<-'EOF'
		import base64, hashlib, sys, zipfile
		d, n, v = sys.argv[1:4]
		info = "%s-%s.dist-info" % (n, v)
		files = {"%s.py" % n: "X = 1\n",
		         info + "/METADATA": "Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (n, v),
		         info + "/WHEEL": "Wheel-Version: 1.0\nGenerator: t\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
		rec = ""
		for k, s in files.items():
		    h = base64.urlsafe_b64encode(hashlib.sha256(s.encode()).digest()).rstrip(b"=").decode()
		    rec += "%s,sha256=%s,%d\n" % (k, h, len(s))
		files[info + "/RECORD"] = rec + info + "/RECORD,,\n"
		with zipfile.ZipFile("%s/%s-%s-py3-none-any.whl" % (d, n, v), "w") as z:
		    for k, s in files.items():
		        z.writestr(k, s)
	EOF
}

# dep_task RULES STORE [ARGS...]: a new task's aibox-proxy (start_recorded: its
# record in $T/record.json, a new proxy.log) for the loopback registry on
# localhost:$REG, RULES on --secrets-fd, the dependency store STORE, the key of
# its secrets' scopes $T/scope-key (the user's, outside the store, as a task's
# is); the task CA it makes in $T/taskca.pem.
dep_task() {
	local st rules=$1 store=$2
	shift 2
	stop_proxy || true
	rm -f "$T/proxy.log"
	exec 5<"$rules" 6>"$T/taskca.pem"
	start_recorded --allow "localhost:$REG" --secrets-fd 5 --ca-fd 6 --cache-dir "$store" \
		--cache-key "$T/scope-key" "$@"
	st=$?
	exec 5<&- 6>&-
	return $st
}

# log_count FILE PATTERN: how many lines of FILE match PATTERN (grep -E).
log_count() {
	grep -cE "$2" "$1" || true
}

# dep_registry [ARGS...]: t/dep-registry serving $T/reg over TLS ($T/ca's
# server certificate) on a free port, REG, its pid REG_PID, its requests in
# $T/reg.log.
dep_registry() {
	serve_registry "$TOP/t/dep-registry" "$@"
}

# serve_registry SCRIPT [ARGS...]: the loopback server SCRIPT (t/dep-registry's
# options) as dep_registry starts it.
serve_registry() {
	local script=$1
	shift
	: >"$T/reg.log"
	"$PY" "$script" --cert "$T/ca/server.pem" --key "$T/ca/server.key" --dir "$T/reg" \
		--port-file "$T/reg.port" --log "$T/reg.log" "$@" 2>"$T/reg.err" &
	REG_PID=$!
	wait_until 10 file_or_gone "$T/reg.port" $REG_PID || return 1
	REG=$(cat "$T/reg.port")
}

# make_deb DIR NAME VERSION: a tiny package, DIR/NAME_VERSION_all.deb.
make_deb() {
	local d
	d=$(mktemp -d) || return 1
	mkdir -p "$d/DEBIAN" "$d/usr/share/$2"
	printf 'Package: %s\nVersion: %s\nArchitecture: all\nMaintainer: t <t@example.org>\nDescription: %s for the cache tests\n' \
		"$2" "$3" "$2" >"$d/DEBIAN/control"
	printf '%s %s\n' "$2" "$3" >"$d/usr/share/$2/v"
	dpkg-deb -Zgzip --root-owner-group -b "$d" "$1/${2}_${3}_all.deb" >/dev/null || return 1
	rm -rf "$d"
}

# make_index ROOT SUITE PACKAGES: dists/SUITE of ROOT, its main/binary-amd64
# index being the file PACKAGES (plain, gzip, xz, each by-hash too: apt
# takes xz unless told gz first), its Release signed into InRelease with the
# key in $GNUPGHOME.
make_index() {
	local root=$1 suite=$2 b=$1/dists/$2/main/binary-amd64 f s
	mkdir -p "$b/by-hash/SHA256"
	cp "$3" "$b/Packages"
	gzip -9n <"$b/Packages" >"$b/Packages.gz"
	xz -9 <"$b/Packages" >"$b/Packages.xz"
	{
		printf 'Origin: t\nLabel: t\nSuite: %s\nCodename: %s\nDate: %s\n' "$suite" "$suite" "$(date -uR)"
		printf 'Architectures: amd64\nComponents: main\nAcquire-By-Hash: yes\nSHA256:\n'
		for f in Packages Packages.gz Packages.xz; do
			s=$(sha256sum "$b/$f" | cut -c1-64)
			cp "$b/$f" "$b/by-hash/SHA256/$s"
			printf ' %s %s main/binary-amd64/%s\n' "$s" "$(stat -c %s "$b/$f")" "$f"
		done
	} >"$root/dists/$suite/Release"
	gpg -q --batch --yes --pinentry-mode loopback --passphrase '' --clearsign \
		-o "$root/dists/$suite/InRelease" "$root/dists/$suite/Release"
}

# make_deb_repo DIR: a loopback Debian repository for t/deb-repo, DIR/repo/debian,
# suite stable with hello 1.0 and world 2.0~rc1 (its index DIR/Packages),
# signed with a new key in DIR/gnupg, exported as DIR/repo.gpg and
# DIR/repo.asc (armored).  The key's gpg-agent is ended.
make_deb_repo() {
	local r=$1/repo/debian
	mkdir -p "$1" && mkdir -m 700 "$1/gnupg" || return 1
	mkdir -p "$r/pool/main"
	GNUPGHOME=$1/gnupg gpg -q --batch --passphrase '' \
		--quick-gen-key 'aibox test repo <t@example.org>' ed25519 sign never 2>/dev/null || return 1
	GNUPGHOME=$1/gnupg gpg -q --batch --export >"$1/repo.gpg"
	GNUPGHOME=$1/gnupg gpg -q --batch --armor --export >"$1/repo.asc"
	make_deb "$r/pool/main" hello 1.0 || return 1
	make_deb "$r/pool/main" world 2.0~rc1 || return 1
	(cd "$r" && dpkg-scanpackages -m pool/main /dev/null 2>/dev/null) >"$1/Packages"
	GNUPGHOME=$1/gnupg make_index "$r" stable "$1/Packages" || return 1
	gpgconf --homedir "$1/gnupg" --kill gpg-agent
}
