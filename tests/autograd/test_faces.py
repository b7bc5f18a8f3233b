"""The declared ops' faces (rtx/_faces.py): generated from one declaration each.

Every face a declaration names exists where it should, with the declared
signature and defaults; no face calls another; the type stubs match; the
fused opcodes and parameter defaults are written once."""

from __future__ import annotations

import importlib.util
import inspect
import os
import re
from pathlib import Path

import pytest

import rtx
from rtx import _faces, _kernels
from rtx._autodiff.ops import OPS
from rtx._autodiff.ops.base import EMPTY, KINDS, parse_signature

PKG = Path(rtx.__file__).resolve().parent
# The checkout whose .pxi files the kernel stub is generated from (wheel test runs
# copy only tests/: no tools/ there, the check skips; see test_wheel_contents.py).
SOURCE = Path(os.environ.get("RTX_SOURCE_TREE") or Path(__file__).resolve().parents[2])
DECLARED = [op for op in OPS.values() if op.signature is not None]


def _where(face: _faces.Face):
    if face.method:
        return rtx.Tensor
    return rtx.nn.functional if face.face == "nn" else rtx


@pytest.mark.parametrize("face", _faces.FACES, ids=lambda f: f"{f.op.name}-{f.face}-{f.name}")
def test_every_declared_face_exists_with_its_signature(face):
    got = getattr(_where(face), face.name)
    assert got is face.fn
    sig = inspect.signature(got)
    names = list(sig.parameters)
    want = [p.name for p in face.params]
    if face.method:
        want[0] = "self"
    assert names == want
    for p, q in zip(face.params[1:], list(sig.parameters.values())[1:], strict=True):
        assert q.default == (inspect.Parameter.empty if p.default is EMPTY else p.default)
        assert (q.kind == inspect.Parameter.KEYWORD_ONLY) == p.kwonly
    assert got.__doc__ and got.__doc__.strip() == face.doc


def test_faces_are_importable_from_their_public_homes():
    for name in _faces.__all__:
        assert name in rtx.__all__ and getattr(rtx, name) is getattr(_faces, name)
        assert name in rtx.functional.__all__
    for name, fn in _faces.NN_FUNCTIONAL.items():
        assert name in rtx.nn.functional.__all__ and getattr(rtx.nn.functional, name) is fn


def test_no_face_calls_another():
    """rtx.nn.functional.relu IS rtx.relu (one function, two homes), and each
    generated body calls its rule through Autodiff.apply and no other face."""
    for name, fn in _faces.NN_FUNCTIONAL.items():
        if name in _faces.__all__:
            assert fn is getattr(rtx, name)
    face_names = {f.name for f in _faces.FACES}
    for f in _faces.FACES:
        called = set(f.fn.__code__.co_names)
        assert "apply" in called, f.name
        assert not (called & face_names - {"to"}), (f.name, called & face_names)
        assert f.source().count(".apply(") == 1


def test_defaults_come_from_the_declaration():
    assert rtx.leaky_relu.__defaults__ == (0.01,)
    assert OPS["leaky_relu"].defaults == {"negative_slope": 0.01}
    assert rtx.nn.LeakyReLU().negative_slope == OPS["leaky_relu"].defaults["negative_slope"]
    assert rtx.nn.ELU().alpha == OPS["elu"].defaults["alpha"]
    assert rtx.nn.Softmax().dim == OPS["softmax"].defaults["dim"]


def test_each_declared_default_is_written_once():
    """A declared default value of a named parameter appears in one place only (the
    declaration), outside the rules ('_autodiff/ops/'), backends and Fusion included."""
    pats = []
    for op in DECLARED:
        for p in op.params:
            if p.default is not EMPTY and isinstance(p.default, float):
                pats.append((op.name, re.compile(
                    rf"\b{p.name}\s*(:\s*float\s*)?=\s*{re.escape(repr(p.default))}\b")))
    assert pats
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG).as_posix()
        if rel.startswith("_autodiff/ops/"):
            continue
        text = path.read_text()
        for op, pat in pats:
            assert not pat.search(text), f"{rel} repeats {op}'s default ({pat.pattern})"


def test_fused_opcodes_are_declared_once():
    """Every opcode of the fused evaluator belongs to exactly one rule (Fusion and
    the program compiler read ``Op.fused``; no second list of names)."""
    fused = [op.fused for op in OPS.values() if op.fused]
    assert len(fused) == len(set(fused))
    assert set(fused) == set(_kernels.FUSED_OPS)


def test_every_kind_is_used_and_unknown_kinds_are_refused():
    used = {p.kind for op in DECLARED for p in op.params}
    used |= {p.kind for op in DECLARED for sig, _, _ in getattr(op, "aliases", {}).values()
             for p in parse_signature(op.name, sig)}
    assert set(KINDS) <= used
    with pytest.raises(ValueError, match="unknown kind"):
        parse_signature("bad", "input: Tensr")


def test_stubs_are_up_to_date():
    """rtx/_faces.pyi and rtx/nn/_faces.pyi are what `python tools/gen_faces.py` writes."""
    for path, text in ((PKG / "_faces.pyi", _faces.stub_text()),
                       (PKG / "nn" / "_faces.pyi", _faces.nn_stub_text())):
        assert path.read_text() == text, f"{path.name} is stale: run python tools/gen_faces.py"


@pytest.mark.skipif(not (SOURCE / "tools" / "kernel_stubs.py").is_file(),
                    reason="no rtx source tree (the .pxi files) to generate from")
def test_kernel_stub_is_up_to_date():
    """rtx/_kernels.pyi is what `python tools/gen_faces.py` writes from the .pxi sources
    (tests/project/test_kernel_stubs.py tests the generator itself)."""
    spec = importlib.util.spec_from_file_location("kernel_stubs",
                                                  SOURCE / "tools" / "kernel_stubs.py")
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    path = SOURCE / "rtx" / "_kernels.pyi"
    assert path.read_text() == gen.stub_text(str(SOURCE)), \
        "rtx/_kernels.pyi is stale: run python tools/gen_faces.py"


def test_binary_faces_take_the_tensor_from_either_side():
    t = rtx.tensor([1.0, 2.0])
    assert rtx.sub(3, t).tolist() == [2.0, 1.0]
    assert (3 - t).tolist() == [2.0, 1.0]
    assert rtx.sub(t, 3).tolist() == [-2.0, -1.0]
    assert rtx.pow(2, t).tolist() == [2.0, 4.0]
    assert rtx.sub([5.0, 5.0], 1.0).tolist() == [4.0, 4.0]   # neither a tensor: default backend
    with rtx.use_backend(rtx.MinimalBackend()):
        m = rtx.tensor([1.0])
    assert rtx.add(2.0, m).backend is m.backend


def test_generated_faces_refuse_bad_kinds_clearly():
    t = rtx.tensor([[1.0, 2.0], [3.0, 4.0]])
    with pytest.raises(TypeError, match="dim must be an int"):
        t.softmax("a")
    with pytest.raises(IndexError, match="out of range"):
        rtx.log_softmax(t, 2)
    with pytest.raises(TypeError, match="num_segments must be an int"):
        rtx.segment_mean(t, [0, 1], 2.0)
    with pytest.raises(TypeError, match="float32 or float64"):
        rtx.segment_max(t.long(), [0, 1], 2)
    with pytest.raises(TypeError, match="mean\\(\\) needs a floating point tensor"):
        rtx.tensor([1, 2]).mean()


def test_an_edge_index_can_take_its_target_count_from_a_tensor():
    """``EdgeIndex(src=x, dst=y)`` with ``y`` a tensor: the targets are checked
    against ``y``'s rows (a layer's bipartite op: sources and targets are features)."""
    import numpy as np

    from rtx._autodiff.ops.base import Op

    class Probe(Op):  # no ``name``: never registered in OPS
        signature = "x: Data, edge_index: EdgeIndex(src=x, dst=y), y: Tensor"
        saves = ()

        @staticmethod
        def forward(ctx, B, x, edge_index, y):
            return B.full((2,), 0.0, np.dtype(np.float64)) if edge_index is None else B.from_numpy(
                np.array([edge_index.num_src, edge_index.num_dst], dtype=np.float64))

    face = _faces.Face(Probe, "function", "probe", Probe.params, "")
    x, y = rtx.zeros(5, 2), rtx.zeros(3, 4)
    assert face.fn(x, np.array([[0, 4], [2, 0]]), y).tolist() == [5.0, 3.0]
    with pytest.raises(IndexError, match="targets"):
        face.fn(x, np.array([[0, 4], [3, 0]]), y)
