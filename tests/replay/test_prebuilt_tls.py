"""The TLS context a forked replay child's first default HTTP client gets, built by the zygote
(tracefix.replay.prebuilt_tls): that client only, in a forked child only, and the same context
the library builds itself, unless the agent changed what it is built from."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="replay children fork")

# a zygote (prebuild, then a client of its own) and one forked child making three clients
ZYGOTE = textwrap.dedent("""
    import json, os, ssl, sys
    import httpx
    from tracefix.replay import prebuilt_tls

    def context(client):
        return client._transport._pool._ssl_context

    def described(ctx):
        return {"verify": int(ctx.verify_mode), "hostname": ctx.check_hostname, "cas": ctx.cert_store_stats()["x509_ca"]}

    done = prebuilt_tls.prebuild(("httpx", "no_such_library"))
    spare = id(httpx._transports.default.create_ssl_context.spare[0])
    seen = {"done": done, "zygote_got_it": id(context(httpx.Client())) == spare}
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        insecure, first, second = httpx.Client(verify=False), httpx.Client(), httpx.Client()
        os.write(write, json.dumps({
            "insecure_got_it": id(context(insecure)) == spare, "insecure": described(context(insecure)),
            "first_got_it": id(context(first)) == spare, "second_got_it": id(context(second)) == spare,
            "first": described(context(first)), "second": described(context(second)),
            "fresh": described(httpx.create_ssl_context())}).encode())
        os._exit(0)
    os.close(write)
    seen.update(json.loads(os.read(read, 65536)))
    os.waitpid(pid, 0)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # an agent that names its own CA file before it makes its client
        os.environ["SSL_CERT_FILE"] = sys.argv[1]
        os.write(write, json.dumps(id(context(httpx.Client())) == spare).encode())
        os._exit(0)
    os.close(write)
    seen["own_ca_file_got_it"] = json.loads(os.read(read, 65536))
    os.waitpid(pid, 0)
    print(json.dumps(seen))
""")


def test_a_forked_childs_first_default_client_gets_the_zygotes_context_and_no_other_does(tmp_path):
    pytest.importorskip("httpx")
    certifi = pytest.importorskip("certifi")
    own_ca_file = tmp_path / "agent-ca.pem"  # the same certificates, in a file of the agent's
    own_ca_file.write_bytes(Path(certifi.where()).read_bytes())
    done = subprocess.run([sys.executable, "-c", ZYGOTE, str(own_ca_file)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["done"] == ["httpx"]
    assert not seen["zygote_got_it"]  # the zygote's own clients build their own
    assert not seen["insecure_got_it"] and seen["insecure"]["verify"] == 0  # other settings: built as asked
    assert seen["first_got_it"] and not seen["second_got_it"]  # one client per child, no two share it
    assert not seen["own_ca_file_got_it"]  # built from the environment it set
    assert seen["first"] == seen["second"] == seen["fresh"]  # what the library builds: verifying, the same CAs
    assert seen["first"]["verify"] == 2 and seen["first"]["hostname"] and seen["first"]["cas"] > 0
