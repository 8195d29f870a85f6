#!/usr/bin/env bats
# Secrets in a real task (docs/proxy.md, "Secrets and interception" and
# "The OAuth login"): one task, logged in with a subscription's token (which
# stays on the host: Claude Code in the VM holds its placeholder), run once
# in setup_file against t/fake-api, whose one tool call has
# the VM's clients (curl, Python's urllib, git, curl on the system bundle
# alone, Node's fetch) reach a loopback HTTPS service (t/tls-echo, its own
# CA, allowed as localhost:PORT with a rule) through the proxy, with the
# secret's placeholder, and npm and pip install from a loopback registry
# (t/dep-registry, the same CA) that wants the secret as its token; the
# tests read what the services got, what came back into the VM and the task
# folder.  The registry's hosts are cached (cache: npm, cache: pypi;
# docs/cache.md): the first task fills the dependency cache in the project's
# scope, and a second task of the same project, booted from the snapshot after
# it, installs the same packages again and gets every artifact from the cache.
# apt-get the same way: the VM's own apt (the image's gzip-first configuration,
# the system bundle with the task CA, https_proxy), as the user aibox in a private
# state, from a loopback Debian repository signed with a test key (t/deb-repo,
# cached as debian, no secret).
load lib-common
load lib-task
load lib-deps
bats_require_minimum_version 1.5.0

VALUE=real-Value-of-MY_TOKEN-5130
OAUTH=sk-ant-oat01-real-token-5130

setup_file() {
	task_setup
	export S=$T
	export AIBOX_DEPS_CACHE=$T/deps
	"$TOP/t/tls-echo" --cert "$T/ca/server.pem" --key "$T/ca/server.key" \
		--port-file "$T/echo.port" --log "$T/echo.seen" 2>"$T/echo.err" &
	echo $! >"$S/echo.pid"
	wait_until 20 file_or_gone "$T/echo.port" $!
	# The private registry: every request must carry the value.
	mkdir -p "$T/reg/npm" "$T/reg/pypi"
	make_npm_tgz "$T/reg/npm" priv-pad 1.2.3
	make_npm_tgz "$T/reg/npm" priv-lib 2.0.0
	make_wheel "$T/reg/pypi" priv_pkg 1.0
	make_wheel "$T/reg/pypi" priv_two 2.0
	printf '%s\n' "$VALUE" >"$S/reg.token"
	"$PY" "$TOP/t/dep-registry" --cert "$T/ca/server.pem" --key "$T/ca/server.key" --dir "$T/reg" \
		--port-file "$T/reg.port" --log "$T/reg.log" --token-file "$S/reg.token" 2>"$T/reg.err" &
	echo $! >"$S/reg.pid"
	wait_until 20 file_or_gone "$T/reg.port" $!
	# The same registry on a second port, its PyPI index cached as pypi (one kind a host).
	"$PY" "$TOP/t/dep-registry" --cert "$T/ca/server.pem" --key "$T/ca/server.key" --dir "$T/reg" \
		--port-file "$T/regy.port" --log "$T/reg.log" --token-file "$S/reg.token" 2>"$T/regy.err" &
	echo $! >"$S/regy.pid"
	wait_until 20 file_or_gone "$T/regy.port" $!
	make_deb_repo "$T/deb"
	"$PY" "$TOP/t/deb-repo" --cert "$T/ca/server.pem" --key "$T/ca/server.key" --dir "$T/deb/repo" \
		--port-file "$T/deb.port" --log "$T/deb.log" 2>"$T/deb.err" &
	echo $! >"$S/deb.pid"
	wait_until 20 file_or_gone "$T/deb.port" $!
	local p r y d probe clients npm apt again
	d=$(cat "$T/deb.port")
	p=$(cat "$T/echo.port")
	r=$(cat "$T/reg.port")
	y=$(cat "$T/regy.port")
	# The subscription's token, not the key.
	unset ANTHROPIC_API_KEY
	cat >"$AIBOX_HOME/projects/repo/config.yaml" <<-EOF2
	env: [CLAUDE_CODE_OAUTH_TOKEN]
	allow:
	  - host: localhost:$p
	    methods: [GET, POST]
	    paths: ["/ok/*"]
	  - {host: localhost:$r, cache: npm}
	  - {host: localhost:$y, cache: pypi}
	  - {host: localhost:$d, cache: debian}
	secrets:
	  - env: MY_TOKEN
	    hosts: [localhost:$p, localhost:$r, localhost:$y]
	EOF2
	# Node's fetch with the placeholder as a Bearer (NODE_USE_ENV_PROXY), pip
	# with it in the index URL; then, in a second command of its own (npm is
	# slow under TCG, and a command has 10 minutes), npm with it as the
	# registry's _authToken in .npmrc.  npm's and pip's caches and logs in the
	# home are committed too (caches.tar).
	clients=$(cat <<-'EOF2'
	node -e 'fetch(process.argv[1], {headers: {Authorization: "Bearer " + process.env.MY_TOKEN}}).then(r => r.text()).then(t => console.log(t), e => console.log("error", e, e.cause))' "https://localhost:@P@/ok/node" >node.out 2>&1
	{ python3 -m pip download --disable-pip-version-check --no-deps -d pipdl --index-url "https://__token__:$MY_TOKEN@localhost:@Y@/simple/" priv-pkg priv-two; echo "exit $?"; } >pip.out 2>&1
	git add node.out pip.out pipdl
	EOF2
	)
	npm=$(cat <<-'EOF2'
	mkdir npmapp && cd npmapp && echo '{"name": "app", "version": "1.0.0"}' >package.json
	printf 'registry=https://localhost:@R@/\n//localhost:@R@/:_authToken=%s\nupdate-notifier=false\n' "$MY_TOKEN" >.npmrc
	{ npm install --no-audit --no-fund priv-pad priv-lib; echo "exit $?"; node -p 'require("priv-pad")'; } >../npm.out 2>&1
	cd ..
	tar -cf caches.tar -C "$HOME" .npm .cache/pip 2>/dev/null
	git add npmapp/.npmrc npmapp/package.json npmapp/package-lock.json npm.out caches.tar
	git commit -q -m npm
	EOF2
	)
	# apt-get in a state of its own (the user aibox cannot write the system's):
	# the image's sources and apt configuration as they are, then an install
	# from the loopback repository, download only (installing takes root).
	apt=$(cat <<-'EOF2'
	cp /etc/apt/sources.list apt-sources.out; apt-config dump Acquire::CompressionTypes >>apt-sources.out
	mkdir -p "$HOME/apt/lists/partial" "$HOME/apt/cache/archives/partial" "$HOME/apt/parts"
	printf '%s\n' '@K@' >"$HOME/apt/repo.asc"
	echo "deb [signed-by=$HOME/apt/repo.asc] https://localhost:@D@/debian stable main" >"$HOME/apt/sources.list"
	o=(-q -o "Dir::Etc::SourceList=$HOME/apt/sources.list" -o "Dir::Etc::SourceParts=$HOME/apt/parts" -o "Dir::State::Lists=$HOME/apt/lists" -o "Dir::Cache=$HOME/apt/cache" -o Debug::NoLocking=1 -o Acquire::Languages=none)
	{ apt-get "${o[@]}" update; echo "exit $?"; apt-get "${o[@]}" install -y --download-only hello world; echo "exit $?"; } >@OUT@ 2>&1
	sha256sum "$HOME"/apt/cache/archives/*.deb >>@OUT@
	git add apt-sources.out @OUT@
	EOF2
	)
	apt=${apt//@K@/$(cat "$T/deb/repo.asc")}
	apt=${apt//@D@/$d}
	clients="$clients
${apt//@OUT@/apt.out}"
	# The second task: the same installs, in a VM whose npm, pip and apt caches are empty.
	again=$(cat <<-'EOF2'
	mkdir npm2 && cd npm2 && echo '{"name": "app2", "version": "1.0.0"}' >package.json
	printf 'registry=https://localhost:@R@/\n//localhost:@R@/:_authToken=%s\nupdate-notifier=false\n' "$MY_TOKEN" >.npmrc
	{ npm install --no-audit --no-fund priv-pad priv-lib; echo "exit $?"; node -p 'require("priv-lib")'; } >../npm2.out 2>&1
	cd ..
	{ python3 -m pip download --disable-pip-version-check --no-deps -d pipdl2 --index-url "https://__token__:$MY_TOKEN@localhost:@Y@/simple/" priv-pkg priv-two; echo "exit $?"; } >pip2.out 2>&1
	git add npm2.out pip2.out pipdl2
	@APT@
	git commit -q -m again
	EOF2
	)
	again=${again//@APT@/${apt//@OUT@/apt2.out}}
	clients=${clients//@R@/$r}
	clients=${clients//@Y@/$y}
	clients=${clients//@P@/$p}
	npm=${npm//@R@/$r}
	again=${again//@R@/$r}
	again=${again//@Y@/$y}
	# Each client's answer (t/tls-echo says what it got) into a file the task commits.
	probe="u=https://localhost:$p
curl -sS -H \"Authorization: Bearer \$MY_TOKEN\" \"\$u/ok/curl?key=\$MY_TOKEN\" >curl.out 2>&1
python3 -c 'import os, urllib.request as u; print(u.urlopen(u.Request(\"https://localhost:$p/ok/python\", headers={\"Authorization\": \"token \" + os.environ[\"MY_TOKEN\"]})).read().decode())' >python.out 2>&1
git -c http.extraHeader=\"Authorization: Bearer \$MY_TOKEN\" ls-remote \"\$u/ok/repo.git\" >git.out 2>&1
env -u CURL_CA_BUNDLE -u SSL_CERT_FILE curl -sS \"\$u/ok/system\" >system.out 2>&1
curl -sS -o /dev/null -w '%{http_code}\n' -X DELETE -H \"Authorization: Bearer \$MY_TOKEN\" \"\$u/ok/del\" >refused.out 2>&1
curl -sS -w '\n%{http_code}\n' -H \"Authorization: Bearer \$MY_TOKEN\" \"\$u/admin\" >>refused.out 2>&1
env >env.out
$clients
git add curl.out python.out git.out system.out refused.out env.out && git commit -q -m probes"
	api "$(python3 -c 'import json, sys; print(json.dumps({"turns": [
	  {"tool_use": {"name": "Bash", "input": {"command": sys.argv[1], "description": "probe", "timeout": 600000}}},
	  {"tool_use": {"name": "Bash", "input": {"command": sys.argv[3], "description": "npm", "timeout": 600000}}},
	  {"text": "I ran the probes."}], "require_bearer": sys.argv[2]}))' "$probe" "$OAUTH" "$npm")"
	echo "$FAKE_API_PID" >"$S/api.pid"
	local status=0 pid
	printf '%s\n%s\n' "$VALUE" "$OAUTH" >"$S/values"
	# The proxy trusts t/tls-echo's CA; the VM trusts the task's.
	MY_TOKEN=$VALUE CLAUDE_CODE_OAUTH_TOKEN=$OAUTH SSL_CERT_FILE=$T/ca/ca.pem \
		aibox task "Run the probes." >"$S/out" 2>"$S/err" 3>&- &
	pid=$!
	# Once the values are taken (the folder's path is out): every command
	# line and environment on this machine, for either value, while it runs.
	wait_until 60 file_or_gone "$S/out" "$pid" || true
	while kill -0 "$pid" 2>/dev/null; do
		grep -laF -f "$S/values" /proc/[0-9]*/cmdline /proc/[0-9]*/environ 2>/dev/null >>"$S/seen" || true
		pgrep -f qemu-system >>"$S/qemus" || true
		sleep 0.5
	done
	wait "$pid" || status=$?
	echo "$status" >"$S/status"
	stop_fake_api
	rm "$S/api.pid"
	[ "$status" = 0 ] || return 0
	# What the repository served the first task; then the second's alone.
	mv "$T/deb.log" "$T/deb1.log"
	# The second task of the project, from the snapshot: the same installs.
	api "$(python3 -c 'import json, sys; print(json.dumps({"turns": [
	  {"tool_use": {"name": "Bash", "input": {"command": sys.argv[1], "description": "again", "timeout": 600000}}},
	  {"text": "I installed them again."}], "require_bearer": sys.argv[2]}))' "$again" "$OAUTH")"
	echo "$FAKE_API_PID" >"$S/api.pid"
	status=0
	MY_TOKEN=$VALUE CLAUDE_CODE_OAUTH_TOKEN=$OAUTH SSL_CERT_FILE=$T/ca/ca.pem \
		aibox task "Install them again." >"$S/out2" 2>"$S/err2" 3>&- || status=$?
	echo "$status" >"$S/status2"
	stop_fake_api
	rm "$S/api.pid"
}

teardown_file() {
	local f
	for f in "$S/api.pid" "$S/echo.pid" "$S/reg.pid" "$S/regy.pid" "$S/deb.pid"; do
		[ -s "$f" ] && kill "$(cat "$f")" 2>/dev/null
	done
	T=$S common_teardown
}

setup() {
	T=$S
	cd "$S/repo" || return 1
}

teardown() {
	true
}

# shared: the task went well; DIR is its folder; its commit is checked out
# in $S/probes, where probe FILE prints a file of it.
shared() {
	DIR=$(cat "$S/out")
	[ "$(cat "$S/status")" = 0 ] || { (show); false; }
	[ -d "$S/probes" ] && return 0
	git clone -q "$S/repo" "$S/probes"
	git -C "$S/probes" fetch -q "$DIR/changes.bundle" "+refs/heads/*:refs/remotes/task/*"
	git -C "$S/probes" checkout -q --detach task/aibox/task
}

probe() {
	cat "$S/probes/$1"
}

@test "task secrets vm: curl, Python and git in the VM trust the task CA and the service gets the value, never the placeholder" {
	shared
	[ -f "$DIR/task_ca.pem" ]
	run openssl x509 -in "$DIR/task_ca.pem" -noout -text
	assert_success
	assert_output --partial "Permitted:"
	# (Node's fetch sends its header names in lower case)
	run grep -c -i '^Authorization: Bearer real-Value-of-MY_TOKEN-5130$' "$T/echo.seen"
	assert_success
	assert_output 3 # curl's, git's and Node's fetch's
	run grep -E '^(GET|POST|DELETE) ' "$T/echo.seen"
	assert_success
	assert_line "GET /ok/curl?key=$VALUE HTTP/1.1"
	assert_line "GET /ok/python HTTP/1.1"
	assert_line --regexp '^GET /ok/repo.git/info/refs\?service=git-upload-pack HTTP/1.1$'
	assert_line "GET /ok/system HTTP/1.1"
	grep -q "Authorization: token $VALUE" "$T/echo.seen"
	run grep -c aibox-secret- "$T/echo.seen"
	assert_failure
	assert_output 0
	# What came back to the VM: the service's echo, the value as its placeholder.
	run probe curl.out
	assert_success
	assert_line --regexp "^GET /ok/curl\?key=aibox-secret-[0-9a-f]{32} HTTP/1.1$"
	run probe python.out
	assert_success
	assert_line --regexp "^Authorization: token aibox-secret-[0-9a-f]{32}$"
	run probe system.out
	assert_success
	assert_line "GET /ok/system HTTP/1.1"
	run probe git.out
	assert_success
	refute_output --partial "SSL certificate problem"
	refute_output --partial "server certificate verification failed"
}

@test "task secrets vm: npm with the placeholder in .npmrc, pip with it in the index URL and Node's fetch: the services get the value" {
	shared
	# The registry answered only requests that carried the value.
	run cat "$T/reg.log"
	assert_success
	assert_line "GET /priv-pad auth=bearer"
	assert_line "GET /priv-pad/-/priv-pad-1.2.3.tgz auth=bearer"
	assert_line "GET /simple/priv-pkg/ auth=basic"
	assert_line "GET /packages/priv_pkg-1.0-py3-none-any.whl auth=basic"
	refute_line --partial "auth=no"
	run probe npm.out
	assert_success
	assert_line "exit 0"
	assert_line "priv-pad 1.2.3"
	run probe npmapp/.npmrc
	assert_success
	assert_line --regexp "^//localhost:[0-9]+/:_authToken=aibox-secret-[0-9a-f]{32}$"
	run probe pip.out
	assert_success
	assert_line "exit 0"
	[ -f "$S/probes/pipdl/priv_pkg-1.0-py3-none-any.whl" ]
	# Node's fetch went through the proxy (NODE_USE_ENV_PROXY) and trusted the task CA.
	run probe node.out
	assert_success
	assert_line "GET /ok/node HTTP/1.1"
	assert_line --regexp "^[Aa]uthorization: Bearer aibox-secret-[0-9a-f]{32}$"
	run grep -c -F "GET /ok/node HTTP/1.1" "$T/echo.seen"
	assert_success
	assert_output 1
	# (one line a host: t/tls-echo and the registry's two ports)
	run grep -c -F 'the secret MY_TOKEN was sent to localhost:' "$S/err"
	assert_success
	assert_output 3
}

@test "task secrets vm: the VM holds the placeholder only: its environment, the commit, the task folder" {
	shared
	run probe env.out
	assert_success
	assert_line --regexp '^MY_TOKEN=aibox-secret-[0-9a-f]{32}$'
	assert_line 'SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt'
	assert_line 'NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt'
	assert_line 'NODE_USE_ENV_PROXY=1'
	assert_line 'PIP_CERT=/etc/ssl/certs/ca-certificates.crt'
	assert_line 'REQUESTS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt'
	# npm's cache and logs were committed (caches.tar; pip left no cache): searched below.
	run tar -tf "$S/probes/caches.tar"
	assert_success
	assert_line --regexp '^\.npm/_cacache/'
	run grep -r -l -a -F "$VALUE" "$S/probes" "$DIR"
	assert_failure
	assert_output ""
	# The bundle's objects are compressed: its unpacked commit was searched above.
	run grep -a -c -F 'Authorization: Bearer $MY_TOKEN' "$DIR/transcript.jsonl"
	assert_success
}

@test "task secrets vm: a request the rule refuses gets the proxy's 403 and never reaches the service" {
	shared
	run probe refused.out
	assert_success
	assert_line --index 0 403
	assert_line "aibox-proxy: path /admin is not allowed"
	assert_line 403
	run grep -E '^(DELETE /ok/del|GET /admin)' "$T/echo.seen"
	assert_failure
	run grep -F 'refused localhost:' "$DIR/proxy.log"
	assert_success
	assert_line --partial 'DELETE /ok/del (method DELETE is not allowed) status=403'
	assert_line --partial 'GET /admin (path /admin is not allowed) status=403'
	run grep -F 'the secret MY_TOKEN was sent to localhost:' "$S/err"
	assert_success
}

@test "task secrets vm: the subscription's token stays on the host: Claude Code in the VM used its placeholder, the API got the token as a Bearer, no process showed it" {
	shared
	run jq -r '.api + " " + (.env_names | join(",")) + " " + (.placeholders | keys_unsorted | join(","))' "$DIR/settings.json"
	assert_output "oauth  CLAUDE_CODE_OAUTH_TOKEN,MY_TOKEN"
	# placeholders only, in settings.json: the init started the task before the session
	run grep -cE '^\[ *[0-9.]+\] started by the init before the session' "$DIR/vm.log"
	assert_output 1
	# (Claude Code keeps its own login out of its tools' environment)
	run probe env.out
	assert_success
	assert_line 'ANTHROPIC_BASE_URL=http://127.0.0.1:3129'
	refute_line --partial ANTHROPIC_API_KEY
	refute_line --partial CLAUDE_CODE_OAUTH_TOKEN
	# every request of Claude Code's reached the API with the token, no key
	local f n=0
	for f in "$S"/rec/*.json; do
		[ "$(jq -r .path "$f")" = /api/hello ] && continue
		assert_equal "$(jq -r .headers.authorization "$f")" "Bearer $OAUTH"
		assert_equal "$(jq -r '.headers["x-api-key"]' "$f")" null
		n=$((n + 1))
	done
	[ "$n" -ge 2 ]
	# QEMU ran while it was watched; no command line or environment held either value
	[ -s "$S/qemus" ]
	run cat "$S/seen"
	assert_output ""
	run grep -r -l -a -F "$OAUTH" "$S/probes" "$DIR"
	assert_failure
	assert_output ""
	run grep -c "allowed localhost:3129 POST /v1/messages" "$DIR/proxy.log"
	assert_success
}

@test "task secrets vm: npm and pip in the VM fill the dependency cache in the project's scope; the second task's installs take every artifact from it, none from upstream" {
	shared
	local dir2 n a
	dir2=$(cat "$S/out2")
	[ "$(cat "$S/status2")" = 0 ] || { (show "$S/err2"); false; }
	# The first task: each artifact fetched once, checked and kept (npm may ask twice).
	for a in /priv-pad/-/priv-pad-1.2.3.tgz /priv-lib/-/priv-lib-2.0.0.tgz \
		/packages/priv_pkg-1.0-py3-none-any.whl /packages/priv_two-2.0-py3-none-any.whl; do
		run grep -c " GET $a status=200 cache=fill " "$DIR/proxy.log"
		assert_output 1
		run grep -c "^GET $a auth=" "$T/reg.log"
		assert_output 1
		run grep -c " GET $a status=200 cache=hit " "$dir2/proxy.log"
		assert_success
	done
	run grep -c " cache=fill " "$dir2/proxy.log"
	assert_failure
	assert_output 0
	# The metadata came from upstream in both tasks.
	run grep -c "^GET /simple/priv-two/ auth=basic$" "$T/reg.log"
	assert_output 2
	# The figures: the record in each summary, and the second task's line.
	run jq -c '.hosts.cache | [.hits, .misses, .refused]' "$DIR/summary.json"
	assert_success
	assert_output "[0,7,0]" # and apt's: the by-hash index and two packages
	run jq -c '.hosts.cache | [.hits >= 4, .misses, .bytes_from_upstream, .refused]' "$dir2/summary.json"
	assert_success
	assert_output "[true,0,0,0]"
	n=$(jq .hosts.cache.hits "$dir2/summary.json")
	grep -qE "aibox\[${dir2: -6}\]: the dependency cache served $n artifacts \([1-9][0-9]* bytes\); 0 came from upstream \(0 bytes\)$" "$S/err2" ||
		fail "$(grep -F 'dependency cache' "$S/err2")"
	# What the VM installed: the packages, whole.
	git -C "$S/probes" fetch -q "$dir2/changes.bundle" "+refs/heads/*:refs/remotes/again/*"
	run git -C "$S/probes" show again/aibox/task:npm2.out
	assert_success
	assert_line "exit 0"
	assert_line "priv-lib 2.0.0"
	run git -C "$S/probes" show again/aibox/task:pip2.out
	assert_success
	assert_line "exit 0"
	run git -C "$S/probes" show again/aibox/task:pipdl2/priv_two-2.0-py3-none-any.whl
	assert_success
	# Kept in the project's scope: it was fetched with the secret.
	run aibox cache list
	assert_success
	assert_line --regexp "  project:repo/[0-9a-f]{32}  https://localhost:[0-9]+/priv-pad/-/priv-pad-1.2.3.tgz#sha512="
	assert_line --regexp "  project:repo/[0-9a-f]{32}  https://localhost:[0-9]+/packages/priv_two-2.0-py3-none-any.whl#sha256="
	run aibox cache verify
	assert_success
}

@test "task secrets vm: apt-get in the VM, with the image's https sources and gzip indexes, fills the dependency cache; the second task's install takes the index and both packages from it, none from upstream" {
	shared
	local dir2 f n u
	dir2=$(cat "$S/out2")
	[ "$(cat "$S/status2")" = 0 ] || { (show "$S/err2"); false; }
	# The image's apt: Debian's mirrors over https, gzip indexes first.
	run probe apt-sources.out
	assert_success
	assert_line "deb https://deb.debian.org/debian bookworm main"
	assert_line "deb https://deb.debian.org/debian-security bookworm-security main"
	refute_output --partial "http:"
	assert_line 'Acquire::CompressionTypes::Order:: "gz";'
	git -C "$S/probes" fetch -q "$dir2/changes.bundle" "+refs/heads/*:refs/remotes/again/*"
	git -C "$S/probes" show again/aibox/task:apt2.out >"$S/apt2.out"
	for f in "$S/probes/apt.out" "$S/apt2.out"; do
		run grep -c '^exit 0$' "$f"
		assert_output 2
		run cat "$f"
		assert_success
		assert_line "$(sha256sum <"$T/deb/repo/debian/pool/main/hello_1.0_all.deb" | cut -c1-64)  /home/aibox/apt/cache/archives/hello_1.0_all.deb"
		assert_line --regexp "^$(sha256sum <"$T/deb/repo/debian/pool/main/world_2.0~rc1_all.deb" | cut -c1-64)  /home/aibox/apt/cache/archives/world_2\.0(~|%7e)rc1_all\.deb\$"
	done
	# The first task: the gzip index by its hash and each package, once from upstream, kept.
	u='^GET /debian/dists/stable/main/binary-amd64/by-hash/SHA256/'$(sha256sum <"$T/deb/repo/debian/dists/stable/main/binary-amd64/Packages.gz" | cut -c1-64)'$'
	run grep -c "$u" "$T/deb1.log"
	assert_output 1
	# (apt writes world's ~ as %7e)
	for n in 'hello_1\.0_all\.deb' 'world_2\.0(~|%7e)rc1_all\.deb'; do
		run grep -c -E "^GET /debian/pool/main/$n\$" "$T/deb1.log"
		assert_output 1
		run grep -c -E " GET /debian/pool/main/$n status=200 cache=fill " "$DIR/proxy.log"
		assert_output 1
		run grep -c -E " GET /debian/pool/main/$n status=200 cache=hit " "$dir2/proxy.log"
		assert_output 1
	done
	# The second: only the signed InRelease from upstream (metadata is never kept).
	run cat "$T/deb.log"
	assert_success
	assert_output "GET /debian/dists/stable/InRelease"
	run aibox cache list
	assert_success
	assert_line --regexp "^.*  -  https://localhost:[0-9]+/debian/pool/main/hello_1.0_all.deb#sha256=$(sha256sum <"$T/deb/repo/debian/pool/main/hello_1.0_all.deb" | cut -c1-64)\$"
}
