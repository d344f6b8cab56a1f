"""bench/nsys_timeline.py: an Nsight Systems kernel trace read as pass_timeline's ops, on a synthetic
trace whose steps are known, and its clear errors on a trace it cannot read."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
HEADER = ('"Start (ns)","Duration (ns)","CorrId","GrdX","GrdY","GrdZ","BlkX","BlkY","BlkZ","Reg/Trd",'
          '"StcSMem (MB)","DymSMem (MB)","Bytes (MB)","Throughput (MB/s)","SrcMemKd","DstMemKd","Device","Ctx",'
          '"GreenCtx","Strm","Name"')


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO / "bench" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def nt():
    _load("pass_timeline")
    return _load("nsys_timeline")


def _kernel(start: int, dur: int, grid: int, threads: int, name: str) -> str:
    return f'{start},{dur},1,{grid},1,1,{threads},1,1,40,0,0,,,,,0,1,,13,"{name}"'


def _copy(start: int) -> str:
    return f'{start},500,2,,,,,,,,,,0.001,2.0,Device,Pageable,0,1,,13,"[CUDA memcpy Device-to-Host]"'


def _decode_step(t0: int) -> list[str]:
    """embed 0-1000, actq 900-2500, the in-proj gemv 2000-4000, the DeltaNet head 3900-9000, the
    glu 8800-11000, the down gemv 10500-13000, the LM head 12800-20000 (ns after t0)."""
    return [
        _kernel(t0, 1000, 1, 256, "k_embed(EmbedArgs)"),
        _kernel(t0 + 900, 1600, 4, 256, "k_actq(ActArgs)"),
        _kernel(t0 + 2000, 2000, 257, 256, "void k_gemv<1, 4, false>(GemvArgs)"),
        _kernel(t0 + 3900, 5100, 16, 512, "k_deltanet_head(DeltanetArgs)"),
        _kernel(t0 + 8800, 2200, 112, 512, "k_gemv_glu_early(GluArgs)"),
        _kernel(t0 + 10500, 2500, 512, 256, "k_gemv<(int)1, (int)1, (bool)0>(GemvArgs)"),
        _kernel(t0 + 12800, 7200, 264, 256, "void k_lm_head<0>(LmHeadArgs)"),
        _copy(t0 + 20100),
    ]


def _trace(steps: int = 8) -> str:
    prefill = [_kernel(0, 1000, 64, 256, "k_embed(EmbedArgs)"),
               _kernel(1000, 9000, 8, 1024, "k_deltanet(DeltanetArgs)"), _copy(10500)]
    rows = prefill + [r for s in range(steps) for r in _decode_step(100_000 + 50_000 * s)]
    return "\n".join(["Generating SQLite file p12.sqlite from p12.nsys-rep", HEADER, *rows]) + "\n"


def test_kernels_become_ops_with_kinds_grids_and_gemv_instances(nt):
    ops = nt.parse(_trace(2))
    assert [o.step for o in ops] == [0, 0] + [1] * 7 + [2] * 7  # the copies left out, a pass from each embed
    step1 = [o for o in ops if o.step == 1]
    assert [o.group for o in step1] == [
        "embed (1 blocks)", "actq (4 blocks)", "gemv <1, 4> (257 blocks)", "deltanet_head (16 blocks)",
        "gemv_glu (112 blocks)", "gemv <1, 1> (512 blocks)", "lm_head (264 blocks)"]
    assert all(o.wait == nt.NO_WAIT for o in ops)  # the trace has no wait release
    assert step1[3].start == 103_900 and step1[3].end == 109_000


def test_the_q4_0_in_proj_kernel_is_a_gemv_of_eight_rows_a_warp(nt):
    # k_gemv_wide (a Q4_0 file's M=1 DeltaNet in-proj) has no template arguments to read
    assert nt.kernel_kind("k_gemv_wide(GemvArgs)") == ("gemv", 1, 8)
    assert nt.kernel_kind("void k_gemv<1, 4, false>(GemvArgs)") == ("gemv", 1, 4)


def test_only_the_common_pass_is_kept_and_the_layer_chain_sums_to_the_step(nt):
    ops = nt.decode_steps(nt.parse(_trace(8)))
    assert {o.step for o in ops} == set(range(8))  # the prompt's pass (k_deltanet) left out
    text = nt.report(ops, 4, False, True)
    assert "Steps: 4 (first 4 of 8 left out); span of a step, median: 20.0 us" in text
    # the DeltaNet layer: actq 2500 - 1000, gemv 4000 - 2500, head 5000, glu 2000, down 2000 ns
    assert "A deltanet layer (1 layers; medians over them, us): 12.00" in text
    assert "| deltanet_head (16 blocks) | 5.00 | 0.10 | - | - |" in text
    line = nt.agreement(ops, 4)
    # 12 us of the layer + the LM head's 7 + embed's 1 = the span's 20: 0.0 % apart
    assert line.startswith("Layers 12.0 us + ops outside them 7.0 us + the first op 1.0 us = 20.0 us")
    assert "0.0 % apart, they agree within 5 %" in line


def test_a_trace_that_does_not_add_up_is_said_to_disagree(nt):
    ops = nt.decode_steps(nt.parse(_trace(6)))
    late = [o if o.kind != "lm_head" else o.__class__(o.step, o.index, o.kind, o.blocks, o.threads, o.mt, o.rpw,
                                                       o.start, o.wait, o.end - 8000) for o in ops]
    # the LM head now ends 1 us before the down product: its share is -1 us, the span 13 us, 7.7 % apart
    assert "= 12.0 us against the step's span 13.0 us: 7.7 % apart, they do not agree within 5 %" in nt.agreement(late, 2)


def test_cli_writes_the_report(nt, tmp_path, capsys):
    f = tmp_path / "p12_cuda_gpu_trace.csv"
    f.write_text(_trace(6))
    assert nt.main([str(f), "--layers", "--skip", "2"]) == 0
    out = capsys.readouterr().out
    assert "A deltanet layer" in out and "they agree within 5 %" in out


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("no header here\n1,2,3\n", "no cuda_gpu_trace header"),
        ('"Start (ns)","Name"\n1,"k_embed"\n', "no column starting 'Duration'"),
        (HEADER + "\n" + _kernel(0, 10, 1, 32, "k_mystery(Args)") + "\n", "line 2: kernel 'k_mystery(Args)' is not an op"),
        (HEADER + "\n" + _kernel(0, 10, 1, 32, "k_gemv(GemvArgs)") + "\n", "no <MT, RPW>"),
        (HEADER + "\n" + _copy(0) + "\n", "no pass (no k_embed kernel)"),
    ],
)
def test_an_unreadable_trace_is_a_clear_error(nt, tmp_path, capsys, content, message):
    f = tmp_path / "t.csv"
    f.write_text(content)
    assert nt.main([str(f)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"nsys_timeline: {f}: ") and message in err
