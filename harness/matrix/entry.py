"""Running one build-matrix entry: its builds (engine, module, test module; the toolchain and the
module's host compiler are CMake options: CMAKE_C_COMPILER, CMAKE_TOOLCHAIN_FILE,
CMAKE_CUDA_HOST_COMPILER) into build/<entry>/, then its built-in checks (dump, loader-fake,
embedded-code, msvc-discovery). Its criteria run through harness/run/suite.py (matrix/run.py)."""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.builder import cmake as B
from harness.builder import toolchains
from harness.builder.fatbin import embedded_code, scan_fatbin
from harness.errors import HarnessError
from harness.matrix.spec import CHECKS_NEED_ENGINE, MINGW_TOOLCHAIN_FILE, TESTMOD_SOURCE, Entry, Matrix, availability
from harness.process import ProcResult, run_process
from harness.run import dumps
from harness.run.runner import NATIVE, Launcher
from harness.contract import inputs
from harness.contract.config import BuildSpec, Config, ProjectSpec


class CheckFail(Exception):
    """Ends one check with FAIL and this reason."""


@dataclass
class CheckResult:
    name: str
    verdict: str  # PASS | FAIL | SKIP
    reason: str
    seconds: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class EntryRun:
    entry: str
    verdict: str
    reason: str
    seconds: float = 0.0
    build_seconds: float = 0.0
    checks: list[CheckResult] = field(default_factory=list)
    builds: dict[str, Any] = field(default_factory=dict)
    dumps: dict[str, dict[str, Any]] = field(default_factory=dict)  # variant -> {dir, files: {name: sha}}

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def win_path(p: Path | str) -> str:
    """A Linux absolute path as wine's Z: drive sees it."""
    return "Z:" + str(Path(p).resolve()).replace("/", "\\")


class EntryRunner:
    """Runs one entry: builds, checks, criteria. Everything lands under build/<entry>/ and the
    report directory (logs/<entry>/...)."""

    def __init__(self, cfg: Config, matrix: Matrix, ent: Entry, report_dir: Path,
                 model: Callable[[], Path], progress: Callable[[str], None] | None = None, force: bool = False):
        self.cfg0 = cfg
        self.matrix = matrix
        self.ent = ent
        self.report_dir = report_dir
        self.model = model
        self.say = progress or (lambda s: print(s, file=sys.stderr, flush=True))
        self.force = force
        self.root = Path(cfg.root)
        self.broot = self.root / cfg.build_dir / ent.name
        binary = "kite.exe" if ent.windows else "kite"
        vendor = "hip" if ent.module.gpu == "hip" else "cuda"
        module = f"kite_{vendor}.dll" if ent.windows else f"libkite_{vendor}.so"
        self.cfg = dataclasses.replace(cfg, binary=binary, module=module,
                                       timeouts={**cfg.timeouts, **({"run": ent.timeout} if ent.timeout else {})})
        self.logs = report_dir / "logs" / ent.name
        self.builds: dict[str, B.BuildResult] = {}
        self.dump_dirs: dict[str, Path] = {}
        self.module_host: str | None = None
        self.module_note = ""

    # -- environment and argv --------------------------------------------------------------

    def timeout(self) -> float:
        return self.cfg.timeout("run", 180)

    def base_env(self) -> dict[str, str]:
        env = dict(self.ent.env)
        if self.ent.runner == "wine":
            prefix = self.root / self.cfg.build_dir / ".wineprefix"
            env.setdefault("WINEPREFIX", str(prefix))
            env.setdefault("WINEDEBUG", "-all")
            env.setdefault("WINEDLLOVERRIDES", "mscoree,mshtml=")
            env.setdefault("WINEARCH", "win64")
        return env

    def launcher(self) -> Launcher:
        """How this entry's engine is started (wine for the MinGW build); criteria use it too."""
        if self.ent.runner == "wine":
            return Launcher([toolchains.probe("wine").path or "wine"], win_path)
        return NATIVE

    def path_arg(self, p: Path | str) -> str:
        return self.launcher().path(str(p))

    def run(self, exe: Path, args: list[str], env: dict[str, str] | None, log: str) -> ProcResult:
        overlay = {**self.base_env(), **(env or {})}
        module_var = self.cfg.env_names.get("module_path", "KITE_CUDA_LIB")
        if overlay.get(module_var, "").startswith("/"):  # a module path handed to the engine
            overlay[module_var] = self.path_arg(overlay[module_var])
        return run_process(self.launcher().prefix + [str(exe), *args], overlay, timeout=self.timeout(),
                           log_prefix=self.logs / log)

    # -- builds ----------------------------------------------------------------------------

    def _compiler_defs(self) -> dict[str, str]:
        tc = self.ent.toolchain
        if tc == "mingw":
            return {"CMAKE_TOOLCHAIN_FILE": str(self.root / MINGW_TOOLCHAIN_FILE)}
        path = toolchains.probe(tc).path or tc
        return {"CMAKE_C_COMPILER": path}

    def _module_defs(self) -> tuple[dict[str, str] | None, str]:
        m = self.ent.module
        if m.gpu == "hip":
            hipcc, defs = B.module_compiler("hip")
            if not hipcc:
                return None, defs["reason"]
            # the loader's refusal tests (noexport, badabi) are vendor-free: the CUDA entries keep them
            return ({**defs, "KITE_HIP_ARCHS": ";".join(m.archs), "KITE_CUDA_TEST_MODULES": "OFF"},
                    f"module compiler: hipcc ({hipcc})")
        defs = {"KITE_CUDA_ARCHS": ";".join(m.archs)}
        if m.host_compiler == "msvc":
            return defs, "msvc (vcvars environment)"
        for hc in [m.host_compiler] + ([m.fallback_host_compiler] if m.fallback_host_compiler else []):
            ok, why = toolchains.nvcc_accepts_host(hc)
            if ok:
                defs["CMAKE_CUDA_HOST_COMPILER"] = toolchains.probe(hc).path or hc
                note = f"module host compiler: {hc} ({why})"
                if hc != m.host_compiler:
                    note = f"module host compiler: {hc}, because {m.host_compiler} was refused"
                return defs, note
            last = why
        return None, last

    def _project(self, source: str, options: dict[str, str]) -> ProjectSpec:
        return ProjectSpec(source, options, ("native/include",))

    def build_engine(self, name: str, options: dict[str, str], with_module: bool) -> B.BuildResult:
        opts = {**self._compiler_defs(), **options}
        mod = None
        if with_module:
            mdefs, note = self._module_defs()
            self.module_note = note
            if mdefs is not None:
                mod = self._project("native/cuda", mdefs)
        msvc = mod is not None and self.ent.module.host_compiler == "msvc"
        # MSVC: nvcc needs the vcvarsall environment: the module is built after the engine, with
        # that environment as an overlay (self.cmake -> build.cmake_project)
        spec = BuildSpec(name, self._project("native", opts) if self.ent.engine else None, None if msvc else mod)
        if msvc and spec.engine is not None:
            cfg = dataclasses.replace(self.cfg, builds={**self.cfg.builds, name: spec})
            res = B.build(cfg, name, force=self.force, progress=self.say)
            tool = toolchains.probe_msvc()
            if not tool.found:
                res.module = B.PartResult("skipped", tool.skip_reason())
            else:
                nvcc = B.find_nvcc() or toolchains.probe("nvcc").path
                res.module = self.cmake(mod.source, self.cfg.build_root(name) / "cuda",
                                        {**mod.options, "KITE_OUTPUT_DIR": res.bin_dir, "CMAKE_CUDA_COMPILER": nvcc},
                                        "module", env=tool.details.get("env") or {})
            self.builds[name] = res
            return res
        if spec.engine is None:
            # module only: build it through a placeholder-free path (no engine needed)
            return self._module_only(name, mod)
        cfg = dataclasses.replace(self.cfg, builds={**self.cfg.builds, name: spec})
        res = B.build(cfg, name, force=self.force, progress=self.say)
        if with_module and mod is None:
            res.module = B.PartResult("skipped", self.module_note)
        self.builds[name] = res
        return res

    def _module_only(self, name: str, mod: ProjectSpec | None) -> B.BuildResult:
        t0 = time.perf_counter()
        bin_dir = self.cfg.build_root(name) / "bin"
        res = B.BuildResult(name, str(bin_dir), "", str(bin_dir / self.cfg.module), B.PartResult("skipped", "engine: false"),
                            B.PartResult("skipped", self.module_note))
        if mod is not None:
            compiler = ({} if self.ent.module.gpu == "hip"
                        else {"CMAKE_CUDA_COMPILER": B.find_nvcc() or toolchains.probe("nvcc").path})
            # module-only entries check the embedded code list: the loader test modules add nothing
            res.module = self.cmake(mod.source, self.cfg.build_root(name) / "cuda",
                                    {**mod.options, "KITE_OUTPUT_DIR": str(bin_dir), **compiler,
                                     "KITE_CUDA_TEST_MODULES": "OFF"},
                                    "module")
            if res.module.status in ("built", "up-to-date") and not (bin_dir / self.cfg.module).exists():
                res.module = B.PartResult("failed", f"build succeeded but {self.cfg.module} not in {bin_dir}",
                                          res.module.log)
        res.seconds = time.perf_counter() - t0
        self.builds[name] = res
        return res

    def cmake(self, source: str, bdir: Path, defs: dict[str, str], label: str,
              env: dict[str, str] | None = None) -> B.PartResult:
        """One CMake project (the test module, a module-only or MSVC module build) through the
        harness's own build code: same generator handling and up-to-date check as `harness build`."""
        proj = ProjectSpec(source, {k: str(v) for k, v in defs.items()}, ("native/include",))
        tools = {"CC": os.environ.get("CC", ""), "CXX": os.environ.get("CXX", "")}
        return B.cmake_project(self.cfg, proj, bdir, {}, self.logs / f"{label}.log", [], tools, self.force, env,
                               progress=self.say)

    def build_testmod(self, bin_dir: Path) -> B.PartResult:
        defs = {"KITE_OUTPUT_DIR": str(bin_dir), **self._compiler_defs()}
        return self.cmake(TESTMOD_SOURCE, self.broot / "testmod", defs, "testmod")

    def fake_paths(self, bin_dir: Path) -> dict[str, Path]:
        t = bin_dir / self.cfg.testmods_dir
        if self.ent.windows:
            return {"fake": t / "fake" / "kite_cuda.dll", "noexport": t / "kite_cuda_fake_noexport.dll",
                    "badabi": t / "kite_cuda_fake_badabi.dll"}
        return {"fake": t / "libkite_cuda_fake.so", "noexport": t / "libkite_cuda_fake_noexport.so",
                "badabi": t / "libkite_cuda_fake_badabi.so"}

    def layout(self, name: str, exe: Path, extra: dict[str, Path] | None = None) -> Path:
        """A folder holding a copy of the engine (and `extra` files under given names)."""
        d = self.broot / "layouts" / name
        if d.exists():
            shutil.rmtree(d)
        d.mkdir(parents=True)
        shutil.copy2(exe, d / exe.name)
        for n, src in (extra or {}).items():
            shutil.copy2(src, d / n)
        return d / exe.name

    def ensure_build(self, name: str) -> B.BuildResult:
        """A criterion's build: `default` is this entry's, `stub` is build/<entry>/stub (the same
        options, KITE_CUDA off), any other is built as configs/engine.yaml says."""
        if name not in ("default", "stub"):
            if name not in self.builds:
                self.builds[name] = B.build(self.cfg0, name, force=self.force, progress=self.say)
            return self.builds[name]
        target = self.ent.name if name == "default" else f"{self.ent.name}/stub"
        if target not in self.builds:
            if name == "stub":
                self.build_engine(target, {**self.ent.cmake, "KITE_CUDA": "OFF"}, with_module=False)
            else:
                self.build_engine(target, self.ent.cmake, with_module=self.ent.module.build)
        return self.builds[target]

    def gpu_info(self) -> dict[str, Any] | None:
        """`info` of this entry's engine, for the `gpu` requirement of its criteria."""
        b = self.builds.get(self.ent.name)
        if b is None or not b.engine_ok:
            return None
        try:
            return self.info(Path(b.bin_dir) / self.cfg.binary, None, "info-probe")
        except CheckFail as ex:
            return {"error": str(ex)}

    # -- checks ----------------------------------------------------------------------------

    def info(self, exe: Path, env: dict[str, str] | None, log: str) -> dict[str, Any]:
        r = self.run(exe, self.cfg.info_args, env, log)
        if not r.ok:
            raise CheckFail(f"`info --json` failed: {r.describe()}")
        try:
            return inputs.json_loads(r.stdout)
        except ValueError as ex:
            raise CheckFail(f"`info --json` printed no JSON: {ex}") from None

    def dump_run(self, exe: Path, out: Path, env: dict[str, str] | None, log: str) -> dict[str, Any]:
        d = self.matrix.dump
        if out.exists():
            shutil.rmtree(out)
        args = ["run", "--model", self.path_arg(self.model()), "--prompt", ",".join(str(t) for t in d.prompt),
                "--steps", str(d.steps), "--dump", self.path_arg(out)]
        if d.threads:
            args += ["--threads", str(d.threads)]
        r = self.run(exe, args, env, log)
        if not r.ok:
            raise CheckFail(f"`kite run` ({log}) failed: {r.describe()}")
        meta, found = self.dumps_in(out)
        files = {}
        for name, d in found.items():
            try:
                sha = dumps.digest(d)
            except dumps.DumpRefused as e:
                raise CheckFail(dumps.refusal("`kite run --dump`", e)) from None
            files[name] = {"file": d.file, "bytes": d.size, "sha256": sha, "shape": d.shape}
        return {"dir": str(out), "files": files, "meta": meta, "wall_s": r.wall_s}

    def check_dump(self, exe: Path, run: EntryRun) -> CheckResult:
        parts = []
        details: dict[str, Any] = {}
        for v in self.matrix.dump.variants:
            # a HIP entry's module runs on an AMD GPU only: its `gpu` is amd_gpu
            reqs = ["amd_gpu" if x == "gpu" and self.ent.module.gpu == "hip" else x for x in v.requires]
            unmet = next((toolchains.probe(x).skip_reason() for x in reqs if not toolchains.probe(x).found), None)
            if unmet:
                details[v.name] = {"skipped": unmet}
                parts.append(f"{v.name}: SKIP")
                continue
            out = self.broot / "dumps" / v.name
            res = self.dump_run(exe, out, v.env, f"dump-{v.name}")
            counters = (res["meta"].get("counters") or {})
            if "gpu" in v.requires and not (counters.get("gpu_steps") or counters.get("mrow_calls")):
                raise CheckFail(f"variant {v.name}: requires a GPU but meta.json counts no GPU step (vacuous)")
            self.dump_dirs[v.name] = out
            run.dumps[v.name] = {"files": res["files"], "shapes": res["meta"].get("shapes"),
                                 "backend_available": (res["meta"].get("backend") or {}).get("available"),
                                 "counters": counters, "wall_s": round(res["wall_s"], 3)}
            details[v.name] = {k: res[k] for k in ("files", "wall_s")}
            parts.append(f"{v.name}: {res['files'].get('logits', {}).get('sha256', '?')[:12]}")
        return CheckResult("dump", "PASS", "; ".join(parts), details=details)

    def dumps_in(self, out: Path) -> tuple[Any, dict[str, dumps.Dump]]:
        """meta.json of a dump folder and each dump of configs/engine.yaml in it,
        found by the reader verify uses (harness/run/dumps.py): only regular files inside the
        folder, never empty, exactly the size their meta.json shape gives."""
        meta: Any = {}
        try:
            meta = inputs.json_loads(inputs.decode_text(inputs.read_inside(out, self.cfg.meta_file, inputs.MAX_META),
                                                        self.cfg.meta_file))
        except FileNotFoundError:
            pass
        except inputs.FileRefused as e:
            raise CheckFail(f"`kite run --dump`: {e}") from None
        except ValueError:
            raise CheckFail(f"{self.cfg.meta_file} is not JSON") from None
        found = {}
        for name, spec in self.cfg.dumps.items():
            try:
                found[name] = dumps.locate(out, spec.file, spec.dtype, dumps.shape(meta, spec.shape))
            except FileNotFoundError:
                raise CheckFail(f"`kite run --dump` wrote no {spec.file}") from None
            except dumps.DumpRefused as e:
                raise CheckFail(dumps.refusal("`kite run --dump`", e)) from None
        return meta, found

    def compare_dirs(self, a: Path, b: Path, label_a: str, label_b: str) -> list[dict[str, Any]]:
        """memcmp of each dump of two dump folders, as verify's: a NaN fails (row "ok")."""
        (_, da), (_, db) = self.dumps_in(a), self.dumps_in(b)
        rows = []
        for name in self.cfg.dumps:
            try:
                d = dumps.compare(da[name], db[name])
            except dumps.DumpRefused as e:
                raise CheckFail(f"{label_a} vs {label_b}: {e}") from None
            rows.append({"case": "", "a": label_a, "b": label_b, "dump": name, "identical": d.identical,
                         "ok": d.ok, "differing": d.differing, "max_ulp": d.max_ulp, "max_abs": d.max_abs,
                         "reason": d.reason})
        return rows

    def absent_dump(self, exe: Path) -> Path:
        """Dumps with the module absent (the engine alone in a folder), made once."""
        out = self.broot / "dumps" / "module-absent"
        if "module-absent" not in self.dump_dirs:
            lone = self.layout("engine-only", exe)
            self.dump_run(lone, out, None, "dump-module-absent")
            self.dump_dirs["module-absent"] = out
        return out

    def check_loader_fake(self, exe: Path, bin_dir: Path) -> CheckResult:
        fakes = self.fake_paths(bin_dir)
        missing = [str(p) for p in fakes.values() if not p.exists()]
        if missing:
            return CheckResult("loader-fake", "FAIL", f"test module(s) not built: {', '.join(missing)}")
        var = self.cfg.env_names.get("module_path", "KITE_CUDA_LIB")
        lone = self.layout("engine-only", exe)
        problems: list[str] = []
        facts: dict[str, Any] = {}
        # (a) explicit path
        doc = self.info(lone, {var: str(fakes["fake"])}, "info-fake-explicit")
        c = doc.get("cuda") or {}
        facts["explicit"] = {k: c.get(k) for k in ("loaded_path", "bound", "module_abi", "available", "init_status",
                                                    "reason")}
        if not c.get("bound"):
            problems.append(f"{var}: fake module not bound ({c.get('note') or c.get('reason')})")
        if c.get("available"):
            problems.append(f"{var}: fake module reported available")
        if c.get("module_abi") != c.get("engine_abi"):
            problems.append(f"{var}: module_abi {c.get('module_abi')} != engine_abi {c.get('engine_abi')}")
        # (b) exe_dir: the fake copied next to the engine under the module's file name
        beside = self.layout("exe-dir-fake", exe, {self.cfg.module: fakes["fake"]})
        doc = self.info(beside, None, "info-fake-exe-dir")
        c = doc.get("cuda") or {}
        steps = {s.get("how"): s.get("result") for s in c.get("search") or []}
        facts["exe_dir"] = {"search": c.get("search"), "bound": c.get("bound")}
        if not c.get("bound") or "loaded" not in str(steps.get("exe_dir", "")):
            problems.append(f"exe_dir: fake not found/bound beside the engine (search: {steps})")
        # (c) refusals: one export missing, other ABI version
        for kind, needle in (("noexport", "kcuda_step_m"), ("badabi", "abi")):
            doc = self.info(lone, {var: str(fakes[kind])}, f"info-{kind}")
            c = doc.get("cuda") or {}
            facts[kind] = {k: c.get(k) for k in ("bound", "module_abi", "available", "note", "reason")}
            text = f"{c.get('note', '')} {c.get('reason', '')}".lower()
            if c.get("bound"):
                problems.append(f"{kind}: module bound, must be refused whole")
            elif needle not in text:
                problems.append(f"{kind}: refused, but the note does not name {needle!r}: {text.strip()[:160]}")
        # (d) output with the fake bound == module absent
        if "dump" in self.ent.checks:
            fdir = self.broot / "dumps" / "fake-bound"
            self.dump_run(beside, fdir, None, "dump-fake-bound")
            rows = self.compare_dirs(self.absent_dump(exe), fdir, "module-absent", "fake-bound")
            facts["comparisons"] = rows
            for r in rows:
                if not r["ok"]:
                    problems.append(f"fake bound vs module absent, {r['dump']}: {r['reason']}")
        if problems:
            return CheckResult("loader-fake", "FAIL", "; ".join(problems), details=facts)
        return CheckResult("loader-fake", "PASS", "fake module bound via KITE_CUDA_LIB and exe_dir (no device); "
                           "noexport and badabi refused by name; output unchanged", details=facts)

    def check_embedded(self, module_path: Path) -> CheckResult:
        cuobj = toolchains.probe("cuobjdump")
        if cuobj.found:
            got = embedded_code(cuobj.path, module_path, self.logs)
            how = f"cuobjdump {cuobj.version}".strip()
        else:  # the fat binary read directly (same lists; cuobjdump is not in the pip nvcc)
            got = scan_fatbin(module_path.read_bytes())
            how = "fatbin headers read directly (" + cuobj.skip_reason() + ")"
        want = {"elf": sorted(self.ent.module.expect_elf or ()), "ptx": sorted(self.ent.module.expect_ptx or ())}
        details = {"got": got, "want": want, "module": str(module_path), "how": how}
        if got != want:
            return CheckResult("embedded-code", "FAIL", f"{how.split(' (')[0]}: SASS {got['elf']} / PTX {got['ptx']}, "
                               f"expected SASS {want['elf']} / PTX {want['ptx']}", details=details)
        return CheckResult("embedded-code", "PASS", f"SASS {got['elf']}, PTX {got['ptx']} as expected "
                           f"[{how.split(' (')[0]}]", details=details)

    def check_msvc(self) -> CheckResult:
        t = toolchains.probe_msvc()
        if not t.found:
            return CheckResult("msvc-discovery", "SKIP", t.skip_reason())
        nv = toolchains.probe("nvcc")
        ok, why = toolchains.msvc_supported_by_nvcc(t.details.get("tools_version", ""), nv.version)
        if not ok:
            return CheckResult("msvc-discovery", "FAIL", why, details=t.details)
        return CheckResult("msvc-discovery", "PASS", f"cl {t.version} at {t.path}", details={"path": t.path})

    # -- the whole entry -------------------------------------------------------------------

    def execute(self) -> EntryRun:
        t0 = time.perf_counter()
        ent = self.ent
        run = EntryRun(ent.name, "PASS", "")
        ok, why = availability(ent)
        if not ok:
            run.verdict, run.reason = "SKIP", why
            run.checks = [CheckResult(c, "SKIP", why) for c in ent.checks]
            run.seconds = time.perf_counter() - t0
            return run
        self.logs.mkdir(parents=True, exist_ok=True)
        self.say(f"matrix {ent.name}: build")
        tb = time.perf_counter()
        b = self.build_engine(ent.name, ent.cmake, with_module=ent.module.build)
        bin_dir = Path(b.bin_dir)
        exe = bin_dir / self.cfg.binary
        tm = None
        if ent.testmod:
            tm = self.build_testmod(bin_dir)
        run.build_seconds = time.perf_counter() - tb
        run.builds = {k: (v.to_json() if hasattr(v, "to_json") else v) for k, v in self.builds.items()}
        if tm is not None:
            run.builds["testmod"] = dataclasses.asdict(tm)
        if self.module_note:
            run.builds["module_note"] = self.module_note
        problems = []
        if ent.engine and not b.engine_ok:
            problems.append(f"engine build failed: {b.engine.reason}")
        if ent.module.build and b.module.status == "failed":
            problems.append(f"module build failed: {b.module.reason}")
        if tm is not None and tm.status == "failed":
            problems.append(f"test module build failed: {tm.reason}")
        for c in ent.checks:
            self.say(f"matrix {ent.name}: {c}")
            tc0 = time.perf_counter()
            try:
                if c in CHECKS_NEED_ENGINE and not b.engine_ok:
                    res = CheckResult(c, "FAIL", f"no engine: {b.engine.reason}")
                elif c == "dump":
                    res = self.check_dump(exe, run)
                elif c == "loader-fake":
                    res = (self.check_loader_fake(exe, bin_dir) if tm is not None and tm.status in ("built", "up-to-date")
                           else CheckResult(c, "FAIL", "test module not built"))
                elif c == "embedded-code":
                    if b.module.status in ("built", "up-to-date"):
                        res = self.check_embedded(Path(b.module_path))
                    elif b.module.status == "skipped":
                        res = CheckResult(c, "SKIP", b.module.reason or "module not built")
                    else:
                        res = CheckResult(c, "FAIL", f"module build failed: {b.module.reason}")
                elif c == "msvc-discovery":
                    res = self.check_msvc()
                else:  # validated away
                    res = CheckResult(c, "FAIL", f"unknown check {c!r}")
            except (CheckFail, HarnessError) as ex:
                res = CheckResult(c, "FAIL", str(ex))
            except Exception as ex:  # noqa: BLE001 - one check's bug must not end the matrix
                res = CheckResult(c, "FAIL", f"internal error: {type(ex).__name__}: {ex}")
            res.seconds = time.perf_counter() - tc0
            run.checks.append(res)
            self.say(f"matrix {ent.name}: {c} {res.verdict} ({res.reason[:140]}) [{res.seconds:.1f} s]")
        fails = [c for c in run.checks if c.verdict == "FAIL"]
        if problems or fails:
            run.verdict = "FAIL"
            run.reason = "; ".join(problems + [f"{c.name}: {c.reason[:160]}" for c in fails])
        else:
            passed = sum(c.verdict == "PASS" for c in run.checks)
            skipped = sum(c.verdict == "SKIP" for c in run.checks)
            run.reason = f"{passed} checks passed" + (f", {skipped} skipped" if skipped else "")
            if self.module_note:
                run.reason += f"; {self.module_note}"
        run.seconds = time.perf_counter() - t0
        return run

