"""test_calls.py: the file protocol (docs/calls.md) end to end. `peat calls export` writes the
calls; examples/calls_harness.py (numpy) answers them; `peat judge` must then say exactly what
`peat run --plugin` says of the same kernel written in C (tests/plugins/plugin_test_gemms.c, the
same fp32 arithmetic in the same order): verdict, findings with their parameters, the candidate's
signature and every probe. Bad input (a missing call or output, another shape or dtype, foreign
or truncated files, unknown ops, options the export decides) is one line on stderr, exit 2."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import h5py
import numpy as np

PEAT, SRC, PLUGIN = os.environ["PEAT_BIN"], os.environ["PEAT_SRC"], os.environ["PEAT_PLUGIN"]
HARNESS = os.path.join(SRC, "examples", "calls_harness.py")
ENV = dict(os.environ, PEAT_GOLDEN_CACHE="off", OPENBLAS_NUM_THREADS="1")


def peat(*args, cwd):
    p = subprocess.run([PEAT, *args], cwd=cwd, env=ENV, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=600)
    return p.returncode, p.stdout, p.stderr


def harness(calls, outs, variant, cwd):
    subprocess.run([sys.executable, HARNESS, calls, outs, variant], cwd=cwd, check=True,
                   timeout=600)


def judged(sig_dir):
    """What a verdict is made of, the kernel's name left out."""
    with open(os.path.join(sig_dir, "signature.json")) as f:
        s = json.load(f)
    cand = dict(s["candidate"])
    cand.pop("kernel", None)
    return {"verdict": s["verdict"],
            "findings": [(f["class"], f["params"], f["acceptance"]) for f in s["findings"]],
            "candidate": cand,
            "probes": [(p["probe"], p["class"], p["params"]) for p in s["probes"]]}


class FileProtocol(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="peat-calls-test-")
        rc, out, err = peat("calls", "export", "--kernel-op", "gemm", "--seed", "7", "--out",
                            "calls.h5", cwd=cls.dir)
        assert rc == 0, "export failed: %s" % err

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def one_line_error(self, rc, err, *words):
        lines = [l for l in err.strip().split("\n") if l]
        self.assertEqual(rc, 2, "exit %d, stderr: %s" % (rc, err))
        self.assertEqual(len(lines), 1, "not one line: %r" % err)
        self.assertTrue(lines[0].startswith("peat: error: "), lines[0])
        for w in words:
            self.assertIn(w, lines[0])

    def test_docs_show_the_harness_whole(self):
        with open(os.path.join(SRC, "docs", "calls.md")) as f:
            doc = f.read()
        with open(HARNESS) as f:
            code = f.read()
        start = doc.index("```python\n") + len("```python\n")
        self.assertEqual(doc[start:doc.index("```", start)], code,
                         "docs/calls.md's harness is not examples/calls_harness.py")

    def test_layout(self):
        with h5py.File(os.path.join(self.dir, "calls.h5")) as f:
            self.assertEqual(f.attrs["peat"], b"calls")
            calls = f["calls"]
            self.assertEqual(len(calls), int(f.attrs["n_calls"][0]))
            stages = {calls[k].attrs["stage"] for k in calls}
            self.assertEqual(stages, {b"playback", b"sequence", b"probe"})
            # only the sequence stage's calls carry state across calls (in order, buffer ids)
            for k in calls:
                c = calls[k]
                self.assertEqual(bool(c.attrs["in_order"][0]), c.attrs["stage"] == b"sequence")
                self.assertEqual(c["in0"].dtype, np.float32)

    def same_as_plugin(self, variant, kernel, env=None):
        outs = "outs_%s.h5" % variant
        harness("calls.h5", outs, variant, self.dir)
        rc_j, _, err = peat("judge", "calls.h5", outs, "--out", "J_" + variant, "--quiet",
                            cwd=self.dir)
        self.assertIn(rc_j, (0, 1), err)
        if env:
            ENV.update(env)
        try:
            rc_p, _, err = peat("run", "--plugin", PLUGIN, "--kernel", kernel, "--seed", "7",
                                "--no-runtime", "--no-diagnose", "--quiet", "--out", "P_" + variant, cwd=self.dir)
        finally:
            for k in env or {}:
                ENV.pop(k)
        self.assertEqual(rc_j, rc_p, err)
        j, p = judged(os.path.join(self.dir, "J_" + variant)), judged(
            os.path.join(self.dir, "P_" + variant))
        self.assertEqual(j, p)
        return j

    def test_honest_same_as_plugin(self):
        j = self.same_as_plugin("kloop", "test_gemm_nightly")
        self.assertEqual(j["verdict"], "PASS")

    def test_dropped_term_same_as_plugin(self):
        j = self.same_as_plugin("dropk", "test_gemm_dropk")
        self.assertEqual(j["verdict"], "FAIL")
        self.assertEqual(j["findings"][0][0], "WRONG_RESULT")

    def test_bf16_same_as_plugin(self):
        j = self.same_as_plugin("bf16", "test_gemm_bf16")
        self.assertEqual(j["verdict"], "FAIL")
        self.assertEqual(j["findings"][0][0], "REDUCED_PRECISION")

    def test_state_through_files(self):
        harness("calls.h5", "outs_cache.h5", "cache", self.dir)
        rc, out, err = peat("judge", "calls.h5", "outs_cache.h5", "--out", "J_cache", "--quiet",
                            cwd=self.dir)
        self.assertEqual(rc, 1, out + err)
        self.assertIn("STATEFUL", [f[0] for f in judged(os.path.join(self.dir, "J_cache"))["findings"]])

    def broken_outs(self, name, edit):
        path = os.path.join(self.dir, name)
        if not os.path.exists(os.path.join(self.dir, "outs_kloop.h5")):
            harness("calls.h5", "outs_kloop.h5", "kloop", self.dir)
        shutil.copy(os.path.join(self.dir, "outs_kloop.h5"), path)
        with h5py.File(path, "a") as f:
            edit(f)
        return name

    def test_missing_call(self):
        name = self.broken_outs("missing.h5", lambda f: f.__delitem__("calls/000005"))
        self.one_line_error(*peat("judge", "calls.h5", name, cwd=self.dir)[::2], "call 5")

    def test_wrong_shape(self):
        def edit(f):
            del f["calls/000003/out0"]
            f["calls/000003"].create_dataset("out0", data=np.zeros((3, 3), np.float32))
        self.one_line_error(*peat("judge", "calls.h5", self.broken_outs("shape.h5", edit),
                                  cwd=self.dir)[::2], "000003", "out0")

    def test_wrong_dtype(self):
        def edit(f):
            d = f["calls/000004/out0"][()].astype(np.float64)
            del f["calls/000004/out0"]
            f["calls/000004"].create_dataset("out0", data=d)
        self.one_line_error(*peat("judge", "calls.h5", self.broken_outs("dtype.h5", edit),
                                  cwd=self.dir)[::2], "000004", "f64")

    def test_failed_call_is_a_kernel_failure(self):
        def edit(f):
            del f["calls/000002/out0"]
            f["calls/000002"].attrs["error"] = np.bytes_("RuntimeError: CUDA out of memory")
        rc, out, err = peat("judge", "calls.h5", self.broken_outs("failed.h5", edit), "--out",
                            "J_failed", cwd=self.dir)
        self.assertEqual(rc, 1, out + err)
        self.assertIn("CUDA out of memory", out)

    def test_nan_outputs_are_judged(self):
        with h5py.File(os.path.join(self.dir, "calls.h5")) as c:
            played = [k for k in c["calls"] if c["calls"][k].attrs["stage"] == b"playback"]

        def edit(f):  # every recorded call, its repeat included (a NaN in one run of the two
            for k in played:  # is NONDETERMINISTIC, as it should be)
                f["calls/" + k + "/out0"][0, 0] = np.nan
        rc, out, err = peat("judge", "calls.h5", self.broken_outs("nan.h5", edit), "--out",
                            "J_nan", cwd=self.dir)
        self.assertEqual(rc, 1, out + err)
        self.assertIn("NAN", [f[0] for f in judged(os.path.join(self.dir, "J_nan"))["findings"]])

    def test_foreign_and_truncated_files(self):
        with open(os.path.join(self.dir, "text.h5"), "w") as f:
            f.write("not hdf5\n")
        self.one_line_error(*peat("judge", "text.h5", "calls.h5", cwd=self.dir)[::2],
                            "not an HDF5 file")
        self.one_line_error(*peat("judge", "calls.h5", "calls.h5", cwd=self.dir)[::2], "outs")
        with open(os.path.join(self.dir, "calls.h5"), "rb") as f:
            data = f.read()
        with open(os.path.join(self.dir, "cut.h5"), "wb") as f:
            f.write(data[:len(data) // 2])
        harness("calls.h5", "outs_kloop.h5", "kloop", self.dir)
        rc, _, err = peat("judge", "cut.h5", "outs_kloop.h5", cwd=self.dir)
        self.one_line_error(rc, err)

    def test_export_refusals(self):
        self.one_line_error(*peat("calls", "export", "--kernel-op", "gemmm", "--out", "x.h5",
                                  cwd=self.dir)[::2], "gemmm")
        self.one_line_error(*peat("calls", "export", "--kernel-op", "gemm", "--kernel",
                                  "gemm_new", cwd=self.dir)[::2], "--kernel")
        self.one_line_error(*peat("calls", "export", "--kernel-op", "gemm", "--out", "calls.h5",
                                  cwd=self.dir)[::2], "exists")
        self.one_line_error(*peat("calls", "export", "--kernel-op", "softmax", "--flow", "mlp",
                                  "--out", "sm.h5", cwd=self.dir)[::2], "softmax")


if __name__ == "__main__":
    unittest.main()
