# Sourced by the GPU machine's scripts (gpu-step.sh, gpu-ablation.sh): the gguf package for the
# model generator, from the wheel the checkout carries in .whl/ (that machine has no network),
# where python3 lacks it. gguf_from_wheel LOG: installs it under /tmp/site, the pip log in LOG.
gguf_from_wheel() {
  if ! python3 -c "import gguf" 2>/dev/null && ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
      .whl/*.whl > "$1" 2>&1
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
  fi
}
