"""Run any page yourself: JupyterLab on the repository, every page a notebook from its markdown.

``make lab`` starts JupyterLab (pinned in the lock) in the book's environment with the
repository as its root and ``book/index.md`` open. jupytext's contents manager (part of the
pinned ``jupytext``) serves each ``.md`` page as a notebook, and this module makes "Jupytext
Notebook" the default viewer of markdown files, so a double click opens a page as a notebook
and saving writes the markdown back: there is no copy step. The kernel ``python3`` is the
environment's own interpreter (ipykernel's native kernel of ``.venv``). The server, and so
every kernel it starts, runs with the book's process settings (:mod:`bookkit.environment`), so
a page run here gives the numbers of ``make book``.

    python -m bookkit.book.lab                   # what `make lab` runs
    python -m bookkit.book.lab --check book/hessian/single_layer.md --profile ci

``--check PAGE`` starts the same server headless, asks it for PAGE as a notebook, starts a
kernel through its REST API and executes every code cell over the kernel's websocket (with the
profile's parameters injected after the parameters cell, as papermill does), and fails on any
error: the test of ``make lab`` without a browser.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from contextlib import contextmanager
from pathlib import Path

from bookkit import environment
from bookkit.book.toc import PROFILES, profile_overrides
from bookkit.paths import find_root

# Markdown (and MyST) files open as notebooks by default; a JupyterLab settings override.
DEFAULT_VIEWERS = {
    "@jupyterlab/docmanager-extension:plugin": {
        "defaultViewers": {"markdown": "Jupytext Notebook", "myst": "Jupytext Notebook"}
    }
}


def install_settings(prefix: Path = Path(sys.prefix)) -> Path:
    """Write the default-viewer override into the environment's JupyterLab settings."""
    path = prefix / "share" / "jupyter" / "lab" / "settings" / "overrides.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    current = json.loads(path.read_text()) if path.exists() else {}
    current.update(DEFAULT_VIEWERS)
    path.write_text(json.dumps(current, indent=2) + "\n")
    return path


def lab_command(root: Path, *, port: int | None = None, token: str | None = None, browser: bool = True) -> list[str]:
    command = [sys.executable, "-m", "jupyterlab", f"--ServerApp.root_dir={root}",
               "--LabApp.default_url=/lab/tree/book/index.md"]
    if port is not None:
        command += [f"--ServerApp.port={port}", "--ServerApp.port_retries=0", "--ServerApp.ip=127.0.0.1"]
    if token is not None:
        command.append(f"--IdentityProvider.token={token}")
    if not browser:
        command.append("--no-browser")
    if os.geteuid() == 0:  # containers and CI run as root, which JupyterLab refuses by default
        command.append("--allow-root")
    return command


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def headless_lab(root: Path, timeout: float = 120.0):
    """A JupyterLab server on a free local port; yields ``(base_url, token)``."""
    port, token = _free_port(), secrets.token_hex(16)
    log = tempfile.TemporaryFile("w+")  # the server's log, read back only if it fails to start
    process = subprocess.Popen(lab_command(root, port=port, token=token, browser=False),
                               cwd=root, stdout=subprocess.DEVNULL, stderr=log, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                _get(base, "/api/status", token)
                break
            except OSError:
                if process.poll() is not None:
                    log.seek(0)
                    raise RuntimeError(f"JupyterLab exited early:\n{log.read()[-2000:]}") from None
                if time.monotonic() > deadline:
                    raise TimeoutError(f"JupyterLab did not answer on {base} within {timeout} s") from None
                time.sleep(0.5)
        yield base, token
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


def _get(base: str, path: str, token: str, method: str = "GET", body: dict | None = None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"{base}{path}", data=data, method=method,
                                     headers={"Authorization": f"token {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        raw = response.read()
        return response.status, (json.loads(raw) if raw[:1] in (b"{", b"[") else raw)


def page_as_notebook(base: str, token: str, page: str) -> dict:
    """The server's notebook model of a markdown page (jupytext's contents manager)."""
    status, model = _get(base, f"/api/contents/{page}?type=notebook&content=1", token)
    if status != 200 or model.get("type") != "notebook":
        raise RuntimeError(f"the server did not open {page} as a notebook (status {status})")
    return model["content"]


def code_to_run(notebook: dict, overrides: dict) -> list[str]:
    """The code cells in order, the profile's assignments right after the parameters cell."""
    cells = []
    for cell in notebook["cells"]:
        if cell["cell_type"] != "code":
            continue
        source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        cells.append(source)
        if "parameters" in cell.get("metadata", {}).get("tags", []) and overrides:
            cells.append("\n".join(f"{name} = {value!r}" for name, value in overrides.items()))
    return cells


def run_in_kernel(base: str, token: str, cells: list[str], timeout: float = 600.0) -> int:
    """Start a ``python3`` kernel through the server and execute ``cells``; returns how many ran."""
    import websocket  # websocket-client, pinned with jupyter_server

    _, kernel = _get(base, "/api/kernels", token, method="POST", body={"name": "python3"})
    url = f"{base.replace('http', 'ws', 1)}/api/kernels/{kernel['id']}/channels?token={token}"
    ws = websocket.create_connection(url, timeout=timeout)
    session = uuid.uuid4().hex
    try:
        for index, code in enumerate(cells):
            msg_id = uuid.uuid4().hex
            ws.send(json.dumps({
                "header": {"msg_id": msg_id, "username": "check", "session": session,
                           "msg_type": "execute_request", "version": "5.3"},
                "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
                "content": {"code": code, "silent": False, "store_history": True,
                            "user_expressions": {}, "allow_stdin": False, "stop_on_error": True},
            }))
            while True:
                message = json.loads(ws.recv())
                if message.get("parent_header", {}).get("msg_id") != msg_id:
                    continue
                if message["msg_type"] == "execute_reply":
                    content = message["content"]
                    if content["status"] != "ok":
                        raise RuntimeError(f"code cell {index} failed in the lab kernel: "
                                           f"{content.get('ename')}: {content.get('evalue')}")
                    break
    finally:
        ws.close()
        _get(base, f"/api/kernels/{kernel['id']}", token, method="DELETE")
    return len(cells)


def check_page(root: Path, page: str, profile: str = "ci") -> int:
    """Open ``page`` (``book/....md``) in a headless JupyterLab and execute it there."""
    overrides = profile_overrides(root / "book" / "profiles.yml", page.removesuffix(".md"), profile)
    with headless_lab(root) as (base, token):
        status, _ = _get(base, "/lab", token)
        if status != 200:
            raise RuntimeError(f"JupyterLab's page /lab answered {status}")
        return run_in_kernel(base, token, code_to_run(page_as_notebook(base, token, page), overrides))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", metavar="PAGE", help="execute PAGE through a headless server and exit")
    parser.add_argument("--profile", default="ci",
                        help=f"parameters for --check: one of {', '.join(PROFILES)} or the page's own (default ci)")
    args = parser.parse_args(argv)
    root = find_root(Path.cwd())
    environment.apply(root)  # the server's kernels inherit the book's process settings
    install_settings()
    if args.check:
        n = check_page(root, args.check, args.profile)
        print(f"lab check: {args.check} opened as a notebook and its {n} code cells ran in the lab kernel")
        return 0
    return subprocess.call(lab_command(root), cwd=root)


if __name__ == "__main__":
    sys.exit(main())
