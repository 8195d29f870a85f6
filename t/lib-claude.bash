# Claude Code for tests: `load lib-claude`, then `need_claude` in a test or
# setup.  It installs @anthropic-ai/claude-code@$CLAUDE_VERSION with npm, once,
# into ${XDG_CACHE_HOME:-$REAL_HOME/.cache}/aibox/claude-code-$CLAUDE_VERSION
# (the test user's own cache, outside the tree and outside $T), and exports
# CLAUDE_BIN, the path to the native binary.
#
# The npm package "@anthropic-ai/claude-code" is a wrapper; the program is a
# native x86-64 executable in its per-platform optional dependency,
# node_modules/@anthropic-ai/claude-code-linux-x64/claude.  The wrapper's
# postinstall only copies that binary to bin/claude.exe, so we skip install
# scripts and use the platform package's binary directly (it needs no node).
#
# Several test runs may share the cache: the install happens in a private
# folder renamed into place under a lock, so a reader sees all or nothing.

CLAUDE_VERSION=${CLAUDE_VERSION:-2.1.197}

claude_cache_dir() {
	local base=${XDG_CACHE_HOME:-${REAL_HOME:-$HOME}/.cache}
	echo "$base/aibox/claude-code-$CLAUDE_VERSION"
}

# install_claude: install once; print nothing on success; non-zero on failure.
install_claude() {
	local dir tmp rel=node_modules/@anthropic-ai/claude-code-linux-x64/claude
	dir=$(claude_cache_dir)
	if [ -x "$dir/$rel" ]; then
		CLAUDE_BIN=$dir/$rel
		export CLAUDE_BIN
		return 0
	fi
	mkdir -p "$(dirname "$dir")" || return 1
	(
		flock 9 || exit 1
		[ -x "$dir/$rel" ] && exit 0
		tmp=$(mktemp -d "$dir.tmp.XXXXXX") || exit 1
		# npm's own cache goes beside ours: the test's HOME is a throwaway
		if ! npm install --prefix "$tmp" --ignore-scripts --no-audit --no-fund \
			--cache "$(dirname "$dir")/npm-cache" \
			"@anthropic-ai/claude-code@$CLAUDE_VERSION" >"$tmp.log" 2>&1; then
			cat "$tmp.log" >&2
			rm -rf "$tmp" "$tmp.log"
			exit 1
		fi
		rm -f "$tmp.log"
		if [ ! -x "$tmp/$rel" ]; then
			echo "lib-claude: npm installed no $rel" >&2
			rm -rf "$tmp"
			exit 1
		fi
		chmod 755 "$tmp"
		rm -rf "$dir"
		mv "$tmp" "$dir"
	) 9>"$dir.lock" || return 1
	CLAUDE_BIN=$dir/$rel
	export CLAUDE_BIN
}

# need_claude: install_claude, or skip the test saying why.
# (npm is Debian's npm package or the one node.js ships with; it is not in
# packages.txt because NodeSource's nodejs, which provides npm, conflicts with
# Debian's npm package.)
need_claude() {
	if [ -z "$(find "$(claude_cache_dir)/node_modules/@anthropic-ai/claude-code-linux-x64" \
		-maxdepth 1 -name claude -perm -u+x 2>/dev/null)" ] && ! command -v npm >/dev/null; then
		skip "npm is not installed, and Claude Code $CLAUDE_VERSION is not in the cache"
	fi
	install_claude || skip "cannot install Claude Code $CLAUDE_VERSION with npm"
}

# start_fake_api SCRIPT [ARGS...]: start t/fake-api on 127.0.0.1 with the
# script, recording to $T/rec; sets FAKE_API_PID and FAKE_API_PORT.  Its log is
# $T/fake-api.log.  Stop it with stop_fake_api (teardown should call it).
start_fake_api() {
	local script=$1
	shift
	rm -f "$T/fake-api.port"
	"$TOP/t/fake-api" --listen 127.0.0.1:0 --ready-file "$T/fake-api.port" \
		--script "$script" --record "$T/rec" "$@" 2>"$T/fake-api.log" &
	FAKE_API_PID=$!
	if ! wait_until 10 file_or_gone "$T/fake-api.port" "$FAKE_API_PID" ||
		[ ! -s "$T/fake-api.port" ]; then
		cat "$T/fake-api.log" >&2
		return 1
	fi
	FAKE_API_PORT=$(cat "$T/fake-api.port")
}

stop_fake_api() {
	if [ -n "${FAKE_API_PID:-}" ]; then
		kill "$FAKE_API_PID" 2>/dev/null
		wait "$FAKE_API_PID" 2>/dev/null || true
		FAKE_API_PID=
	fi
	return 0
}

# run_claude ARGS...: Claude Code in --print mode against the fake API, with
# no side traffic and no retries; HOME is the test's.  As root (only with
# AIBOX_TEST_AS_ROOT) it needs IS_SANDBOX=1 to accept bypassPermissions.
run_claude() {
	local sandbox=()
	[ "$(id -u)" = 0 ] && sandbox=(IS_SANDBOX=1)
	env -u HTTP_PROXY -u HTTPS_PROXY -u http_proxy -u https_proxy \
		ANTHROPIC_BASE_URL="http://127.0.0.1:$FAKE_API_PORT" \
		ANTHROPIC_API_KEY="${FAKE_API_KEY:-sk-test}" \
		CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 \
		CLAUDE_CODE_MAX_RETRIES=0 \
		DISABLE_AUTOUPDATER=1 \
		HOME="$HOME" "${sandbox[@]}" \
		timeout 120 "$CLAUDE_BIN" --print --output-format stream-json --verbose "$@"
}

# claude_via_proxy ARGS...: Claude Code in --print mode as a task's VM runs it,
# through the proxy at $PROXY (HTTP(S)_PROXY, no NO_PROXY) with
# ANTHROPIC_BASE_URL at its key forwarding port and a placeholder key (or
# the login CLAUDE_LOGIN names, NAME=VALUE, when set); no side traffic, no
# retries, HOME the test's.  Its stream-json in $T/out.jsonl, its stderr in
# $T/err; returns its status.
claude_via_proxy() {
	local sandbox=()
	[ "$(id -u)" = 0 ] && sandbox=(IS_SANDBOX=1)
	env -u NO_PROXY -u no_proxy -u ANTHROPIC_API_KEY -u CLAUDE_CODE_OAUTH_TOKEN \
		HTTPS_PROXY="$PROXY" HTTP_PROXY="$PROXY" https_proxy="$PROXY" http_proxy="$PROXY" \
		ANTHROPIC_BASE_URL=http://127.0.0.1:3129 "${CLAUDE_LOGIN:-ANTHROPIC_API_KEY=sk-ant-placeholder}" \
		CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 CLAUDE_CODE_MAX_RETRIES=0 \
		DISABLE_AUTOUPDATER=1 HOME="$HOME" "${sandbox[@]}" \
		timeout 120 "$CLAUDE_BIN" --print --output-format stream-json --verbose "$@" \
		>"$T/out.jsonl" 2>"$T/err"
}
