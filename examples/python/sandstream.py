"""A small client for the Sandstream HTTP API, standard library only (urllib, json).

    client = Sandstream("http://127.0.0.1:8080", api_key=None)
    sandbox = client.create_sandbox()  # the API's default image; or image="sandstream/debian:bookworm"
    result = sandbox.exec("echo hello", on_output=lambda stream, line: print(line))
    sandbox.write_file("notes.txt", "hi\\n")
    print(sandbox.read_file("notes.txt"))
    sandbox.close()

Errors come back as application/problem+json (RFC 9457); they are raised as SandstreamError
with the status, the problem's type and its detail, which names the field and the rule.
"""

import json
import urllib.error
import urllib.parse
import urllib.request


class SandstreamError(Exception):
    def __init__(self, status, problem):
        self.status = status
        self.problem = problem
        self.type = problem.get("type", "")
        super().__init__(f"{status} {problem.get('detail', problem.get('title', 'error'))}")


class Sandstream:
    def __init__(self, url, api_key=None, timeout=300):
        self.url = url.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout

    def request(self, method, path, query=None, body=None, content_type=None, accept=None):
        """One request; answers the open response (the caller reads it), or raises SandstreamError."""
        url = self.url + path
        if query:
            url += "?" + urllib.parse.urlencode({k: v for k, v in query.items() if v is not None})
        headers = {}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        if accept:
            headers["Accept"] = accept
        data = None
        if body is not None:
            if isinstance(body, (bytes, str)):
                data = body.encode() if isinstance(body, str) else body
                headers["Content-Type"] = content_type or "application/octet-stream"
            else:
                data = json.dumps(body).encode()
                headers["Content-Type"] = "application/json"
        req = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            return urllib.request.urlopen(req, timeout=self.timeout)
        except urllib.error.HTTPError as err:
            raw = err.read()
            try:
                problem = json.loads(raw)
            except ValueError:
                problem = {"detail": raw.decode(errors="replace")}
            raise SandstreamError(err.code, problem) from None

    def json(self, method, path, **kwargs):
        with self.request(method, path, **kwargs) as response:
            raw = response.read()
            return json.loads(raw) if raw else None

    def create_sandbox(self, **spec):
        """Creates a sandbox from a spec as the SDK's (image or template, env, labels …); waits until it is ready."""
        record = self.json("POST", "/v1/sandboxes", body=spec)
        return Sandbox(self, record["id"])


def server_sent_events(response):
    """Yields (event, data) of a text/event-stream response as its lines arrive."""
    event, data = "message", []
    for raw in response:
        line = raw.decode("utf-8").rstrip("\r\n")
        if line == "":
            if data:
                yield event, "\n".join(data)
            event, data = "message", []
        elif line.startswith(":"):
            continue
        else:
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "event":
                event = value
            elif field == "data":
                data.append(value)


class Sandbox:
    def __init__(self, client, sandbox_id):
        self.client = client
        self.id = sandbox_id
        self.path = "/v1/sandboxes/" + urllib.parse.quote(sandbox_id, safe="")

    def exec(self, command, on_output=None, **options):
        """Runs a command (a shell string, or an argv list) and streams its output lines to
        on_output(stream, line) as they come; answers the result (exitCode, stdout, stderr …)."""
        body = {"command": command, **options}
        with self.client.request("POST", self.path + "/exec", body=body, accept="text/event-stream") as response:
            for event, data in server_sent_events(response):
                payload = json.loads(data)
                if event in ("stdout", "stderr") and on_output:
                    on_output(event, payload["line"])
                elif event == "result":
                    return payload
                elif event == "error":
                    raise SandstreamError(payload.get("status", 500), payload)
        raise SandstreamError(502, {"detail": "the stream ended before the command's result"})

    def write_file(self, path, content):
        return self.client.json(
            "PUT", self.path + "/fs", query={"path": path}, body=content, content_type="text/plain; charset=utf-8"
        )

    def read_file(self, path):
        with self.client.request("GET", self.path + "/fs", query={"path": path}) as response:
            return response.read().decode("utf-8")

    def list_files(self, path="."):
        return self.client.json("GET", self.path + "/ls", query={"path": path})["entries"]

    def close(self):
        return self.client.json("DELETE", self.path)
