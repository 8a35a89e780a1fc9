"""Reads `docker compose config --format json` on stdin and checks what Compose itself does
not: that every build context has its Dockerfile and every bind-mounted file exists."""

import json
import os
import sys


def main() -> int:
    config = json.load(sys.stdin)
    services = config.get("services", {})
    missing = []
    for name, service in services.items():
        build = service.get("build")
        if build:
            dockerfile = os.path.join(build["context"], build.get("dockerfile", "Dockerfile"))
            if not os.path.isfile(dockerfile):
                missing.append(f"{name}: build file {dockerfile}")
        for volume in service.get("volumes", []):
            if volume.get("type") == "bind" and not os.path.exists(volume["source"]):
                missing.append(f"{name}: bind mount source {volume['source']}")
    for item in missing:
        print(f"missing {item}")
    if missing:
        return 1
    print(f"{len(services)} services; every build file and bind mount source exists")
    return 0


if __name__ == "__main__":
    sys.exit(main())
