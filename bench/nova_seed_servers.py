"""Seed Nova's database with many ACTIVE servers, for bench/side_by_side.py.

Run by the Nova venv's interpreter (it imports Nova), not the project's. It calls the peers'
``nova_api_seed.py`` (imported from ``--peers-dir``) once per server in one process, then gives
each server what cloudseed's servers of the benchmark have too: a key pair, the same user data
and server metadata. Prints one uuid per line.
"""

import argparse
import base64
import os
import sys


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--peers-dir", required=True)
    parser.add_argument("--config-dir", required=True)
    parser.add_argument("--project-id", required=True)
    parser.add_argument("--user-id", required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--key-name", required=True)
    parser.add_argument("--public-key", required=True)
    parser.add_argument("--user-data-file")
    parser.add_argument("--metadata", default="{}", help="server metadata, JSON")
    args = parser.parse_args()
    sys.path.insert(0, args.peers_dir)
    import json

    import nova_api_seed  # the peers' script: monkey-patches threading first, as Nova does
    from nova import config, objects
    from nova import context as nova_context

    config.parse_args(
        ["nova-bench-seed"],
        default_config_files=[os.path.join(args.config_dir, "nova.conf")],
        init_rpc=True,
    )
    objects.register_all()
    user_data = None
    if args.user_data_file:
        with open(args.user_data_file, "rb") as f:
            user_data = base64.b64encode(f.read()).decode()
    metadata = json.loads(args.metadata)
    seed_args = argparse.Namespace(
        project_id=args.project_id,
        user_id=args.user_id,
        image_id="c0ffee00-0000-4000-8000-000000000001",
        name="bench",
    )
    admin = nova_context.get_admin_context()
    cell = nova_api_seed._cell1(admin)
    real_print = print
    for _ in range(args.count):
        printed: list[str] = []
        nova_api_seed.print = printed.append  # seed() prints the uuid; keep it
        nova_api_seed.seed(seed_args)
        uuid = printed[-1]
        with nova_context.target_cell(admin, cell) as cctxt:
            instance = objects.Instance.get_by_uuid(cctxt, uuid)
            instance.key_name = args.key_name
            instance.key_data = args.public_key
            # meta_data.json's keys come from instance.keypairs (instance_extra), the EC2
            # tree's from key_name/key_data: both, as a real boot leaves them.
            instance.keypairs = objects.KeyPairList(
                objects=[
                    objects.KeyPair(
                        name=args.key_name,
                        user_id=args.user_id,
                        public_key=args.public_key,
                        type="ssh",
                    )
                ]
            )
            if user_data is not None:
                instance.user_data = user_data
            instance.metadata = metadata
            instance.save()
        real_print(uuid, flush=True)


if __name__ == "__main__":
    main()
