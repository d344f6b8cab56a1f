"""Toolchain probing: version banners and MSVC discovery (vswhere JSON, vcvarsall `set` text),
all on captured text, so they run on any host."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.builder import toolchains as tc

DATA = Path(__file__).parent / "data" / "msvc"


def read(name: str) -> str:
    return (DATA / name).read_bytes().decode("utf-8")


@pytest.mark.parametrize("text,want", [
    ("gcc (Debian 12.2.0-14+deb12u1) 12.2.0\nCopyright (C) 2022 Free Software Foundation, Inc.\n", "12.2.0"),
    ("gcc (GCC) 14.2.1 20240912 (Red Hat 14.2.1-3)\n", "14.2.1"),
    ("x86_64-w64-mingw32-gcc (GCC) 12-win32\nCopyright (C) 2022\n", "12-win32"),
    ("x86_64-w64-mingw32-gcc (GCC) 10-posix 20220113\n", "10"),
])
def test_gcc_banners(text, want):
    assert tc.parse_gcc_version(text).startswith(want)


def test_other_banners():
    assert tc.parse_clang_version("Debian clang version 14.0.6\nTarget: x86_64-pc-linux-gnu\n") == "14.0.6"
    assert tc.parse_clang_version("clang version 18.1.8 (https://github.com/llvm/llvm-project 3b5b5c1)\n") == "18.1.8"
    nv = ("nvcc: NVIDIA (R) Cuda compiler driver\nCopyright (c) 2005-2025 NVIDIA Corporation\n"
          "Built on Wed_Jul_16_07:30:01_PM_PDT_2025\nCuda compilation tools, release 13.0, V13.0.88\n"
          "Build cuda_13.0.r13.0/compiler.36424714_0\n")
    assert tc.parse_nvcc_version(nv) == "13.0.88"
    assert tc.parse_wine_version("it looks like wine32 is missing\nwine-8.0 (Debian 8.0~repack-4)\n") == "8.0"
    assert tc.parse_cmake_version("cmake version 3.25.1\n\nCMake suite maintained") == "3.25.1"
    assert tc.parse_cl_banner(read("cl-banner.txt")) == "19.40.33811"
    assert tc.version_tuple("14.40.33807") == (14, 40, 33807)


def test_vswhere_single_buildtools():
    (inst,) = tc.parse_vswhere(read("vswhere-vs2022-buildtools.json"))
    assert inst.version == "17.10.35013.160"
    assert inst.product == "Microsoft.VisualStudio.Product.BuildTools"
    assert inst.vcvarsall == ("C:\\Program Files (x86)\\Microsoft Visual Studio\\2022\\BuildTools"
                              "\\VC\\Auxiliary\\Build\\vcvarsall.bat")
    assert not inst.prerelease and inst.complete


def test_vswhere_picks_release_newest_first():
    installs = tc.parse_vswhere(read("vswhere-two-installs.json"))
    assert [i.name for i in installs] == ["Visual Studio Community 2022", "Visual Studio Professional 2019",
                                          "Visual Studio Community 2022 Preview"]


def test_vswhere_empty_and_garbage():
    assert tc.parse_vswhere(read("vswhere-none.json")) == []
    assert tc.parse_vswhere("") == []
    with pytest.raises(ValueError, match="not JSON"):
        tc.parse_vswhere("'vswhere' is not recognized as an internal or external command")
    with pytest.raises(ValueError, match="JSON list"):
        tc.parse_vswhere('{"installationPath": "C:\\\\x"}')


def test_set_output_parser():
    env = tc.parse_set_output("** banner **\r\nA=1\r\n=C:=C:\\work\r\nProgramFiles(x86)=C:\\P86\r\nB=x=y\r\n")
    assert env == {"A": "1", "ProgramFiles(x86)": "C:\\P86", "B": "x=y"}
    assert tc.env_get(env, "programfiles(X86)") == "C:\\P86"


def test_vcvars_environment():
    base = tc.parse_set_output(read("baseline-set.txt"))
    m = tc.parse_vcvars_env(read("vcvarsall-x64-set.txt"), baseline=base)
    tools = "C:\\Program Files (x86)\\Microsoft Visual Studio\\2022\\BuildTools\\VC\\Tools\\MSVC\\14.40.33807"
    assert m.cl == tools + "\\bin\\HostX64\\x64\\cl.exe"
    assert m.tools_version == "14.40.33807"
    assert m.tools_dir == tools + "\\"
    assert (m.host_arch, m.target_arch) == ("x64", "x64")
    assert m.vs_version == "17.10.3"
    assert m.sdk_version == "10.0.22621.0"
    assert m.include[0] == tools + "\\include"
    assert any(p.endswith("\\ucrt") for p in m.include)
    assert m.lib[1] == tools + "\\lib\\x64"
    # PATH entries vcvars added, in order, none of the baseline's
    assert m.path_added[0] == tools + "\\bin\\HostX64\\x64"
    assert "C:\\Windows\\system32" not in m.path_added
    assert len(m.path_added) == 12
    # what nvcc / CMake need, and nothing of the user's own
    assert {"PATH", "INCLUDE", "LIB", "LIBPATH", "VCToolsVersion"} <= set(m.env)
    assert "USERNAME" not in m.env
    assert "CUDA\\v13.0\\bin" in m.env["PATH"]


def test_vcvars_error_is_reported():
    with pytest.raises(ValueError) as e:
        tc.parse_vcvars_env(read("vcvarsall-error-set.txt"))
    msg = str(e.value)
    assert "VCToolsInstallDir" in msg and "INCLUDE" in msg
    assert "Toolset directory for version '14.29' was not found" in msg


def test_msvc_nvcc_compat():
    assert tc.msvc_supported_by_nvcc("14.40.33807", "13.0.88") == (True, "")
    ok, why = tc.msvc_supported_by_nvcc("14.16.27023", "13.0.88")
    assert not ok and "14.29" in why
    assert not tc.msvc_supported_by_nvcc("", "13.0")[0]


def test_msvc_probe_skips_off_windows(monkeypatch):
    if tc.os.name == "nt":
        pytest.skip("Windows host")
    t = tc.probe_msvc()
    assert not t.found
    assert "Windows" in t.reason
    assert "Build Tools" in t.hint
    assert t.skip_reason().startswith("msvc not available: ")


def test_absent_tool_has_hint(monkeypatch):
    monkeypatch.setattr(tc.shutil, "which", lambda name: None)
    t = tc._simple("mingw", ("x86_64-w64-mingw32-gcc",), tc.parse_gcc_version)
    assert not t.found
    assert "gcc-mingw-w64-x86-64" in t.hint
    t = tc._simple("wine", ("wine",), tc.parse_wine_version)
    assert "apt-get install wine wine64" in t.skip_reason()


def test_unknown_tool():
    t = tc.probe("fortran")
    assert not t.found and "known:" in t.reason
