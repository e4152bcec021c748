#!/bin/sh
# Wait while /tmp/cloudseed-quiet.lock exists: someone is measuring on this machine, and a
# TCG guest or an image build would use both cores. Checked every 30 s.
while [ -e /tmp/cloudseed-quiet.lock ]; do
    echo "waiting: /tmp/cloudseed-quiet.lock exists"
    sleep 30
done
