#!/usr/bin/python3
"""tests/record_fixtures.py — record what a real ipykernel sends on iopub for
the scenarios the capture layer must handle, as data for tests/unit_capture.c
and tests/unit_render.c.

Run from anywhere with Debian's Python (jupyter_client, ipykernel, pandas,
matplotlib, PIL) and commit the output:

    /usr/bin/python3 tests/record_fixtures.py            # all scenarios
    /usr/bin/python3 tests/record_fixtures.py tqdm_progress error_in_function

Each scenario runs in a fresh kernel (Debian kernelspec "python3"), so its
execution_count is 1 and nothing leaks between scenarios.  One file per
scenario, tests/fixtures/<scenario>.json:

    {"scenario": NAME,
     "code": the cell,
     "iopub": [ {"msg_type", "header": {"msg_type"}, "metadata", "content"}, ... ],
     "reply": the execute_reply content}

"iopub" holds every iopub message whose parent is the execute_request, in
arrival order (status busy/idle and execute_input included).  Message ids,
sessions and dates are left out because they change on every run; contents
are kept as sent (transient.display_id included), except the reply's
engine_info.engine_uuid.
"""

import json
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_DIR = os.path.join(HERE, "fixtures")
TIMEOUT = 60

# Figures: sizes chosen so the PNG is exactly figsize * dpi pixels (the
# inline backend's default bbox_inches="tight" would crop it).
MPL_SETUP = """\
%config InlineBackend.print_figure_kwargs = {"bbox_inches": None}
import matplotlib
import matplotlib.pyplot as plt
plt.rcParams["figure.dpi"] = 50
"""

SCENARIOS = [
    ("expr_result", "1+1"),
    ("stream_basic",
     'import sys\n'
     'sys.stderr.write("warning: careful\\n")\n'
     'print("hello")\n'),
    ("dataframe",
     'import pandas as pd\n'
     'df = pd.DataFrame({"a": [1, 2, 3], "b": ["x", "y", "z"]})\n'
     'df\n'),
    ("plot_one",
     MPL_SETUP +
     'import pandas as pd\n'
     'df = pd.DataFrame({"a": [1, 3, 2], "b": [2, 1, 3]})\n'
     'df.plot(figsize=(4, 3))\n'
     'plt.show()\n'),
    ("plot_two",
     MPL_SETUP +
     'plt.figure(figsize=(4, 3))\n'
     'plt.plot([1, 2, 3])\n'
     'plt.figure(figsize=(3, 2))\n'
     'plt.plot([3, 2, 1])\n'
     'plt.show()\n'),
    ("tqdm_progress",
     'import time\n'
     'for i in range(101):\n'
     '    print(f"\\r{i}%", end="", flush=True)\n'
     '    time.sleep(0.001)\n'
     'print()\n'),
    ("clear_output_wait",
     'from IPython.display import clear_output\n'
     'for i in range(5):\n'
     '    clear_output(wait=True)\n'
     '    print(i)\n'),
    ("display_update",
     'from IPython.display import display\n'
     'h = display("first", display_id=True)\n'
     'h.update("second")\n'),
    ("error_in_function",
     'def divide(a, b):\n'
     '    return a / b\n'
     '\n'
     'divide(1, 0)\n'),
    ("unicode",
     'print("héllo wörld 🎉 日本語 中文 한국어")\n'),
    ("large_print",
     'for i in range(1, 5001):\n'
     '    print(f"line {i}")\n'),
    ("interleaved",
     'import sys\n'
     'print("out1", flush=True)\n'
     'print("err1", file=sys.stderr, flush=True)\n'
     'print("out2", flush=True)\n'
     'print("err2", file=sys.stderr, flush=True)\n'
     'print("out3", flush=True)\n'),
    ("image_result",
     'from PIL import Image\n'
     'Image.new("RGB", (40, 30), (255, 0, 0))\n'),
    ("jpeg_display",
     'import io\n'
     'from PIL import Image as PILImage\n'
     'from IPython.display import Image, display\n'
     'buf = io.BytesIO()\n'
     'PILImage.new("RGB", (24, 16), (0, 128, 255)).save(buf, format="JPEG")\n'
     'display(Image(data=buf.getvalue(), format="jpeg"))\n'),
    ("svg_display",
     'from IPython.display import SVG, display\n'
     'display(SVG(\'<svg xmlns="http://www.w3.org/2000/svg" width="20" height="10">\'\n'
     '            \'<rect width="20" height="10" fill="red"/></svg>\'))\n'),
]


def scrub_reply(content):
    content = dict(content)
    info = content.get("engine_info")
    if isinstance(info, dict):
        info = dict(info)
        info.pop("engine_uuid", None)
        content["engine_info"] = info
    return content


def record(name, code, workdir):
    from jupyter_client.manager import KernelManager

    km = KernelManager(kernel_name="python3")
    km.transport = "ipc"
    km.ip = os.path.join(workdir, "kernel")
    km.start_kernel(cwd=workdir, env=kernel_env(workdir))
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=TIMEOUT)
        msg_id = kc.execute(code)
        iopub = []
        while True:
            msg = kc.get_iopub_msg(timeout=TIMEOUT)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            iopub.append({
                "msg_type": msg["msg_type"],
                "header": {"msg_type": msg["header"]["msg_type"]},
                "metadata": msg["metadata"],
                "content": msg["content"],
            })
            if (msg["msg_type"] == "status"
                    and msg["content"].get("execution_state") == "idle"):
                break
        while True:
            reply = kc.get_shell_msg(timeout=TIMEOUT)
            if reply["parent_header"].get("msg_id") == msg_id:
                break
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    return {"scenario": name, "code": code, "iopub": iopub,
            "reply": scrub_reply(reply["content"])}


def kernel_env(workdir):
    env = dict(os.environ)
    env["IPYTHONDIR"] = os.path.join(workdir, "ipython")
    env["MPLCONFIGDIR"] = os.path.join(workdir, "mpl")
    env["HOME"] = workdir
    env.pop("MPLBACKEND", None)
    env.pop("PYTHONSTARTUP", None)
    return env


def main(argv):
    # The Debian kernelspec first, so no other Python's "python3" can win.
    os.environ["JUPYTER_PATH"] = "/usr/share/jupyter"
    # ipykernel's debugger otherwise warns about frozen modules on stderr.
    os.environ["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"
    wanted = set(argv[1:])
    known = {name for name, _ in SCENARIOS}
    unknown = wanted - known
    if unknown:
        sys.stderr.write("record_fixtures: unknown scenario(s): %s\n"
                         % ", ".join(sorted(unknown)))
        return 2
    os.makedirs(OUT_DIR, exist_ok=True)
    for name, code in SCENARIOS:
        if wanted and name not in wanted:
            continue
        workdir = tempfile.mkdtemp(prefix="kbox-fixture-")
        try:
            fixture = record(name, code, workdir)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        path = os.path.join(OUT_DIR, name + ".json")
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            json.dump(fixture, f, ensure_ascii=False, indent=1, sort_keys=True)
            f.write("\n")
        os.replace(path + ".tmp", path)
        types = [m["msg_type"] for m in fixture["iopub"]]
        sys.stderr.write("%s: %d iopub messages (%s), reply %s, %d bytes\n"
                         % (name, len(types), ", ".join(sorted(set(types))),
                            fixture["reply"].get("status"), os.path.getsize(path)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
