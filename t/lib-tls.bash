# A throwaway certificate authority for tests: `load lib-tls`.
#
# make_test_ca DIR: writes into DIR (created if needed)
#   ca.pem, ca.key          a CA certificate (basicConstraints critical CA:TRUE,
#                           keyUsage keyCertSign, cRLSign) and its key
#   server.pem, server.key  a server certificate signed by it, for 127.0.0.1,
#                           ::1 and localhost (subjectAltName), CA:FALSE,
#                           extendedKeyUsage serverAuth
# All keys are EC P-256 (fast); valid for 30 days from now.  Give
# ca.pem to what must trust the server (AIBOX_API_CA, curl --cacert).
make_test_ca() {
	local dir=$1
	mkdir -p "$dir" || return 1
	(
		set -e
		cd "$dir"
		umask 077
		openssl ecparam -name prime256v1 -genkey -noout -out ca.key 2>/dev/null
		openssl req -new -x509 -key ca.key -out ca.pem -days 30 -sha256 \
			-subj "/CN=aibox test CA" \
			-addext "basicConstraints=critical,CA:TRUE" \
			-addext "keyUsage=critical,keyCertSign,cRLSign" \
			-addext "subjectKeyIdentifier=hash" 2>/dev/null
		openssl ecparam -name prime256v1 -genkey -noout -out server.key 2>/dev/null
		openssl req -new -key server.key -out server.csr -subj "/CN=localhost" 2>/dev/null
		cat >server.ext <<-EXT
			basicConstraints=critical,CA:FALSE
			keyUsage=critical,digitalSignature,keyEncipherment
			extendedKeyUsage=serverAuth
			subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost
			authorityKeyIdentifier=keyid
		EXT
		openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial \
			-out server.pem -days 30 -sha256 -extfile server.ext 2>/dev/null
		rm -f server.csr server.ext ca.srl
		chmod 644 ca.pem server.pem
	)
}

# start_echo NAME [--plain]: a t/tls-echo with $T/ca's server certificate on a
# free port (plain HTTP with --plain), its requests in $T/NAME.seen; sets
# NAME's port in ECHO_PORT.
# stop_echoes ends every one started.  Needs lib-common.
start_echo() {
	rm -f "$T/$1.port"
	"$TOP/t/tls-echo" --cert "$T/ca/server.pem" --key "$T/ca/server.key" \
		--port-file "$T/$1.port" --log "$T/$1.seen" "${@:2}" 2>"$T/$1.err" &
	echo $! >>"$T/echo.pids"
	wait_until 30 file_or_gone "$T/$1.port" $! || return 1
	ECHO_PORT=$(cat "$T/$1.port")
}

stop_echoes() {
	if [ -s "$T/echo.pids" ]; then
		kill $(cat "$T/echo.pids") 2>/dev/null
	fi
	return 0
}
