#!/usr/bin/env bash
# Make a certificate authority and the certificates of a tls:// Dask cluster with openssl:
#
#   cluster/tls/make-certs.sh DIR [--hosts "10.0.0.5 sched.example.org"] [--days 365]
#
# writes into DIR (created, mode 700):
#   ca.pem, ca-key.pem                   the CA (keep ca-key.pem off the cluster)
#   scheduler.pem, scheduler-key.pem     the scheduler's certificate and key
#   worker.pem, worker-key.pem           the workers' (and nannies')
#   client.pem, client-key.pem           for mkrk / your Python client
# Every certificate is signed by the CA and valid for localhost, 127.0.0.1 and --hosts.
# Dask's TLS requires a certificate signed by the CA on both ends of every connection, so
# a client without client.pem/client-key.pem is refused. Use them with
#   cluster/local/start-cluster.sh --tls-dir DIR
#   mkrk fit data.npz --scheduler tls://127.0.0.1:8786 --tls-ca DIR/ca.pem \
#       --tls-cert DIR/client.pem --tls-key DIR/client-key.pem --out run1
set -euo pipefail

usage() { sed -n "2,17p" "$0"; }
[[ $# -ge 1 && "$1" != -* ]] || { usage >&2; exit 2; }
DIR=$1; shift
HOSTS=""
DAYS=365
while [[ $# -gt 0 ]]; do
  case "$1" in
    --hosts) HOSTS=$2; shift 2;;
    --days) DAYS=$2; shift 2;;
    -h|--help) usage; exit 0;;
    *) echo "make-certs.sh: unknown option $1 (see --help)" >&2; exit 2;;
  esac
done
command -v openssl >/dev/null || { echo "make-certs.sh: openssl is not installed" >&2; exit 2; }
[[ -e "$DIR/ca.pem" ]] && { echo "make-certs.sh: $DIR already holds a CA (ca.pem); remove it or choose another folder" >&2; exit 2; }

mkdir -p "$DIR"
chmod 700 "$DIR"
cd "$DIR"
umask 077

SAN="DNS:localhost,IP:127.0.0.1"
for h in $HOSTS; do
  if [[ "$h" =~ ^[0-9.]+$ || "$h" == *:* ]]; then SAN="$SAN,IP:$h"; else SAN="$SAN,DNS:$h"; fi
done

openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days "$DAYS" -subj "/CN=mkrk-dask CA" \
  -keyout ca-key.pem -out ca.pem \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
  2>/dev/null

cat >leaf.ext <<EXT
basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth,clientAuth
subjectAltName=$SAN
subjectKeyIdentifier=hash
authorityKeyIdentifier=keyid
EXT
for name in scheduler worker client; do
  openssl req -newkey rsa:2048 -nodes -sha256 -subj "/CN=mkrk-dask $name" \
    -keyout "$name-key.pem" -out "$name.csr" 2>/dev/null
  openssl x509 -req -sha256 -days "$DAYS" -in "$name.csr" -CA ca.pem -CAkey ca-key.pem \
    -CAcreateserial -extfile leaf.ext -out "$name.pem" 2>/dev/null
  rm -f "$name.csr"
done
rm -f leaf.ext ca.srl
chmod 644 ca.pem scheduler.pem worker.pem client.pem
echo "make-certs.sh: CA and scheduler/worker/client certificates in $(pwd) (valid for $SAN, $DAYS days)" >&2
