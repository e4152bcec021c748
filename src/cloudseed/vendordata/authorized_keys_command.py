#!/usr/bin/python3 -I
"""cloudseed-authorized-keys USER: sshd's AuthorizedKeysCommand for cloudseed's live keys.

Prints the public keys cloudseed's metadata service serves this guest now, one per line
(``GET /openstack/latest/authorized_keys?user=USER``), so that a key added to or removed from
the server through the API works, or stops working, at the next login. Prints nothing when the
keys cannot be had: sshd then takes no key from here (and logs the exit status). A session
token is fetched only when the service asks for one (401), so a login normally costs one
request. Standard library only, any Python 3 from 3.6: it runs in the guest, not in cloudseed.

cloudseed's login-time check installs it (docs/live-keys.md) with this sshd configuration::

    AuthorizedKeysCommand /usr/local/sbin/cloudseed-authorized-keys %u
    AuthorizedKeysCommandUser nobody
"""

import os
import sys
import urllib.error
import urllib.parse
import urllib.request

# cloudseed's own tests point this at a test server; sshd runs the command with an
# environment of its own, so no login can set it.
BASE_URL = os.environ.get("CLOUDSEED_TEST_METADATA_URL", "http://169.254.169.254").rstrip("/")
PATH = "/openstack/latest/authorized_keys"
TIMEOUT = 2.0  # seconds per request: the login waits for it
MAX_BYTES = 256 * 1024
TOKEN_TTL = "60"  # seconds: the token serves this one login


def fetch(opener, url, headers, method="GET"):
    # type: (urllib.request.OpenerDirector, str, dict[str, str], str) -> bytes
    request = urllib.request.Request(url, headers=headers, method=method)
    with opener.open(request, timeout=TIMEOUT) as response:
        body = response.read(MAX_BYTES + 1)  # type: bytes
    if len(body) > MAX_BYTES:
        raise ValueError("answer too large")
    return body


def authorized_keys(user):
    # type: (str) -> bytes
    url = BASE_URL + PATH
    if user:
        url += "?" + urllib.parse.urlencode({"user": user})
    # No proxy from the environment: the metadata service is on the link.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        return fetch(opener, url, {})
    except urllib.error.HTTPError as error:
        error.close()
        if error.code != 401:
            raise
    ttl = {"X-aws-ec2-metadata-token-ttl-seconds": TOKEN_TTL}
    token = fetch(opener, BASE_URL + "/latest/api/token", ttl, "PUT")
    return fetch(opener, url, {"X-aws-ec2-metadata-token": token.decode("ascii")})


def main(argv):
    # type: (list[str]) -> int
    try:
        text = authorized_keys(argv[1] if len(argv) > 1 else "").decode("utf-8")
    except Exception:
        return 1  # nothing printed: no key from here
    sys.stdout.write("".join(line + "\n" for line in text.splitlines() if line.strip()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
