#!/usr/bin/env python3
"""A stand-in for the Kubernetes API server, as much of it as the mltune
DaemonSet entrypoint (deploy/container/entrypoint.sh) uses: GET and PATCH
(JSON merge patch) of one Node object, with a service account token.

    fake-kube-api.py DIR

DIR/node.json is the Node (metadata.name, labels, resourceVersion;
spec.taints, spec.unschedulable); tests edit it (write a new file, rename
it over) and read it back. DIR/token holds the bearer token expected.
DIR/mode "error" makes every request fail with 500. Every request is
appended to DIR/requests as "METHOD PATH|AUTHORIZATION|ACCEPT|CONTENT-TYPE|BODY".
A PATCH whose metadata.resourceVersion is not the node's is refused with
409 Conflict, as the API server does; an accepted one bumps it. The port
(127.0.0.1, chosen by the kernel) is written to DIR/port once listening.
"""
import http.server
import json
import os
import sys

D = sys.argv[1]


def path(name):
    return os.path.join(D, name)


def read(name, default=""):
    try:
        with open(path(name)) as f:
            return f.read()
    except FileNotFoundError:
        return default


def write_atomic(name, text):
    tmp = path("." + name + ".tmp")
    with open(tmp, "w") as f:
        f.write(text)
    os.rename(tmp, path(name))


def merge(target, patch):
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return patch
    if not isinstance(target, dict):
        target = {}
    for k, v in patch.items():
        if v is None:
            target.pop(k, None)
        else:
            target[k] = merge(target.get(k), v)
    return target


class Handler(http.server.BaseHTTPRequestHandler):
    def _log(self, body=""):
        h = self.headers
        with open(path("requests"), "a") as f:
            f.write("%s %s|%s|%s|%s|%s\n" % (self.command, self.path, h.get("Authorization"), h.get("Accept"),
                                             h.get("Content-Type"), body.replace("\n", " ")))

    def _reply(self, code, obj):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _status(self, code, reason, message):
        self._reply(code, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason,
                           "message": message, "code": code})

    def _node(self):
        """The node this request names, or None (a reply was sent)."""
        if read("mode").strip() == "error":
            self._status(500, "InternalError", "fake-kube-api: mode error")
            return None
        if self.headers.get("Authorization") != "Bearer " + read("token").strip():
            self._status(401, "Unauthorized", "bad token")
            return None
        node = json.loads(read("node.json"))
        if self.path.split("?")[0] != "/api/v1/nodes/" + node["metadata"]["name"]:
            self._status(404, "NotFound", "no such object: " + self.path)
            return None
        return node

    def do_GET(self):
        self._log()
        node = self._node()
        if node is not None:
            self._reply(200, node)

    def do_PATCH(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0"))).decode()
        self._log(body)
        node = self._node()
        if node is None:
            return
        if self.headers.get("Content-Type") != "application/merge-patch+json":
            return self._status(415, "UnsupportedMediaType", "only application/merge-patch+json here")
        patch = json.loads(body)
        want_rv = (patch.get("metadata") or {}).get("resourceVersion")
        rv = node["metadata"].get("resourceVersion", "1")
        if want_rv is not None and want_rv != rv:
            return self._status(409, "Conflict", "the object has been modified; resourceVersion %s, not %s" %
                                (rv, want_rv))
        node = merge(node, patch)
        node["metadata"]["resourceVersion"] = str(int(rv) + 1)
        write_atomic("node.json", json.dumps(node, indent=1))
        self._reply(200, node)

    def log_message(self, *args):
        pass


server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
write_atomic("port", str(server.server_port))
server.serve_forever()
