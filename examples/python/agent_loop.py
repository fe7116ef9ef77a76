"""An agent's tool loop against Sandstream over HTTP, with nothing but the standard library.

    python3 agent_loop.py [--url http://127.0.0.1:8080] [--image sandstream/debian:bookworm]

Without --image the API's default (its API_DEFAULT_IMAGE, the local sandstream/debian:bookworm
after `npm start`) is used, so the loop runs as printed on a fresh quick start.

The API key, if the API wants one, comes from $SANDSTREAM_API_KEY. Each "tool call" an agent
would make is one step below: create a sandbox, write a file, run commands with their output
streamed as it comes, read a file back, and close the sandbox whatever happened.
"""

import argparse
import os
import sys

from sandstream import Sandstream, SandstreamError


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=os.environ.get("SANDSTREAM_URL", "http://127.0.0.1:8080"))
    parser.add_argument("--image", default=None, help="default: the API's default image")
    args = parser.parse_args()

    client = Sandstream(args.url, api_key=os.environ.get("SANDSTREAM_API_KEY"))
    spec = {"labels": {"example": "python"}}
    if args.image:
        spec["image"] = args.image
    sandbox = client.create_sandbox(**spec)
    print(f"sandbox {sandbox.id} ready", flush=True)
    try:
        # Tool: write a file.
        written = sandbox.write_file("src/greet.sh", 'for i in 1 2 3; do echo "hello $i"; sleep 0.2; done\n')
        print(f"wrote {written['bytesWritten']} bytes", flush=True)

        # Tool: run a command, its output streamed line by line.
        result = sandbox.exec("sh src/greet.sh", on_output=lambda stream, line: print(f"[{stream}] {line}", flush=True))
        print(f"exit {result['exitCode']}", flush=True)

        # Tool: a command that fails: the agent sees its code and stderr, not an exception.
        failed = sandbox.exec(["sh", "-c", "echo oops >&2; exit 3"])
        print(f"exit {failed['exitCode']} stderr {failed['stderr'].strip()}", flush=True)

        # Tool: produce a file with a command, then read it back.
        sandbox.exec("mkdir -p out && sh src/greet.sh | wc -l > out/count.txt")
        print(f"count {sandbox.read_file('out/count.txt').strip()}", flush=True)
        print("files " + " ".join(sorted(e["path"] for e in sandbox.list_files("src"))), flush=True)

        # A bad request is refused with the field and the rule.
        try:
            sandbox.exec("true", timeout=5)
        except SandstreamError as err:
            print(f"refused {err.status} {err.problem['errors'][0]['field']}", flush=True)
    finally:
        closed = sandbox.close()
        print(f"closed {closed['state']} ({closed.get('reason')})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
