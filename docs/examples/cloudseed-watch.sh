#!/bin/sh
# Run a hook whenever a metadata document of this instance changes (user data by default),
# without a reboot: a long-poll on cloudseed's metadata service (docs/change-notification.md).
#
#   cloudseed-watch.sh HOOK [ARGS...]
#
# HOOK runs with the new document's path as its last argument, once per change of the
# document's bytes (a change elsewhere in the instance's record moves the ETag too; the
# bytes are compared so the hook does not run for it). Not at start: cloud-init ran the
# document at boot. Settings (environment):
#   METADATA_URL        http://169.254.169.254
#   WATCH_DOCUMENT      openstack/latest/user_data (or openstack/latest/meta_data.json, or
#                       "openstack/latest/?recursive=true" for all of the instance's data)
#   WATCH_TIMEOUT       seconds per long-poll, at most the service's max_wait_timeout_sec (300)
#   WATCH_STATE         directory for the last document (/run/cloudseed-watch)
#   WATCH_CURL_OPTS     more curl options (word-split), e.g. --interface for tests
#   WATCH_ONCE          1: exit after the hook has run once (tests)
set -u

[ $# -ge 1 ] || { echo "usage: $0 HOOK [ARGS...]" >&2; exit 2; }
URL=${METADATA_URL:-http://169.254.169.254}
DOCUMENT=${WATCH_DOCUMENT:-openstack/latest/user_data}
TIMEOUT=${WATCH_TIMEOUT:-300}
STATE=${WATCH_STATE:-/run/cloudseed-watch}
CURL_OPTS=${WATCH_CURL_OPTS:-}
mkdir -p "$STATE" || exit 1
case $DOCUMENT in *\?*) JOINT='&' ;; *) JOINT='?' ;; esac

token=""
new_token() {
    # A session token where the service requires one (EC2's IMDSv2); none is fine otherwise.
    # shellcheck disable=SC2086
    token=$(curl -sf $CURL_OPTS -X PUT -H "X-aws-ec2-metadata-token-ttl-seconds: 21600" \
        "$URL/latest/api/token") || token=""
}

# fetch QUERY: the document into $STATE/body, its headers into $STATE/head; prints the status
fetch() {
    # shellcheck disable=SC2086
    curl -s $CURL_OPTS --max-time $((TIMEOUT + 30)) -o "$STATE/body" -D "$STATE/head" \
        -w '%{http_code}' ${token:+-H "X-aws-ec2-metadata-token: $token"} \
        "$URL/$DOCUMENT$1" || echo 000
}

etag() { sed -n 's/^[Ee][Tt][Aa][Gg]: *\([^[:space:]]*\).*/\1/p' "$STATE/head"; }

# "Now": the current document and its tag; a missing document (404) is an empty one.
last_tag=""
while :; do
    status=$(fetch "")
    case $status in
        200) last_tag=$(etag); cp "$STATE/body" "$STATE/current"; break ;;
        404) : > "$STATE/current"; break ;;
        401|403) new_token ;;
        *) sleep 5 ;;
    esac
done

while :; do
    if [ -n "$last_tag" ]; then
        status=$(fetch "${JOINT}wait_for_change=true&timeout_sec=$TIMEOUT&last_etag=$last_tag")
    else
        sleep 10  # nothing to wait on (no such document yet): look again now and then
        status=$(fetch "")
    fi
    case $status in
        200) last_tag=$(etag) ;;
        404) last_tag=""; : > "$STATE/body" ;;
        401|403) new_token; continue ;;
        *) sleep 5; continue ;;  # unreachable, 503 (too many waiting), 5xx: back off
    esac
    if ! cmp -s "$STATE/body" "$STATE/current"; then
        mv "$STATE/body" "$STATE/current"
        "$@" "$STATE/current" || echo "$0: hook exited $?" >&2
        [ "${WATCH_ONCE:-0}" = 1 ] && exit 0
    fi
done
