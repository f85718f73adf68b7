#!/usr/bin/env bash
# WebGPU (Dawn) vs wasm on a lent GPU machine, which has no Node.js, no npm registry and no Vulkan loader.
#
# Prepare here, once (both folders are listed in .git/info/exclude; about 36 MiB together):
#   bench/device/gpu-check.sh --prepare
# then run it there with the device tool, carrying both folders (about 3 minutes; name steps to run fewer):
#   run(command: "bash bench/device/gpu-check.sh [select-auto webgpu wasm bench-model-wasm]",
#       carry: [".gl", ".devcarry"], timeout_s: 420)
# Results land in $OUT: webgpu.json, wasm.json, bench-model-wasm.json, select-auto.json and gpu-check.log.
# The engine itself (bench/model.ts, bench/device/engine-check.ts) on both backends, about 4 minutes:
#   run(command: "bash bench/device/gpu-check.sh select-auto engine-webgpu engine-wasm bench-model-webgpu bench-model-wasm",
#       carry: [".gl", ".devcarry"], timeout_s: 300)
# The whole GPU suite in one call (issue #21; at most ~8 minutes, each step under its own timeout below):
#   run(command: "bash bench/device/gpu-check.sh suite", carry: [".gl", ".devcarry"], timeout_s: 600)
# = select-auto and select-auto-qwen (the measured backend choice on the bench model, on Qwen2.5-0.5B's shapes), kernels (every numerics check of
# worker/webgpu/*.test.ts against the cpu backend, then our matmul vs tfjs's, f32 and f16, in GFLOP/s),
# engine-webgpu + engine-wasm (worker/webgpu.test.ts's comparison: same tokens, losses), bench-model-qwen (bench/model.ts
# --config qwen2.5-0.5b: train_tokens_per_s and train_mfu in f32 and, as `*_mixed`, in mixed precision; decoding with f32
# and, as `*_f16_weights`, f16 weights). It ends by merging every step's JSON into $OUT/gpu-suite-DATE.json: copy that file next to
# the earlier ones (bench/device/h200-DATE.json). At most 8 files come back: the suite writes 8. Each step's timeout
# bounds it (580 s together); a typical run takes about 5 minutes. Without a GPU, try it on lavapipe first:
#   OUT=/tmp/suite bash bench/device/gpu-check.sh select-auto kernels-quick bench-model-qwen-quick merge   (after --prepare)
#
# What travels: .gl/ holds the Vulkan/GL loader .debs (the device README's recipe); .devcarry/ holds this
# machine's node binary (xz), one esbuild bundle of bench/device/gpu-check.ts with tfjs inlined (CommonJS, so that
# tfjs-backend-wasm finds its .wasm files beside it), and the `webgpu` package's index.js with only its linux-x64
# dawn.node (xz; the package is 132 MB with every platform's build).
set -u
cd "$(dirname "$0")/../.."

if [ "${1:-}" = "--prepare" ]; then
  set -e
  mkdir -p .gl /tmp/amd64/partial .devcarry/app/node_modules/webgpu/dist/linux-x64
  o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
  apt-get $o update >/dev/null
  (cd .gl && apt-get $o download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
  xz -T1 -6 -c "$(command -v node)" > .devcarry/node.xz
  xz -T1 -6 -c node_modules/webgpu/dist/linux-x64/dawn.node > .devcarry/dawn.node.xz
  cp node_modules/webgpu/index.js node_modules/webgpu/package.json .devcarry/app/node_modules/webgpu/
  cp node_modules/@tensorflow/tfjs-backend-wasm/dist/*.wasm .devcarry/app/
  npx esbuild bench/device/gpu-check.ts --bundle --platform=node --format=cjs --target=node20 \
    --external:webgpu --external:@tensorflow/tfjs-node --external:@tensorflow/tfjs-node-gpu \
    --outfile=.devcarry/app/gpu-check.cjs --log-level=warning --log-override:empty-import-meta=silent
  du -sh .gl .devcarry
  exit 0
fi

OUT=${OUT:-/tmp/gpu-check-out}
mkdir -p "$OUT"
exec > >(tee "$OUT/gpu-check.log") 2>&1

unxz_to() { # unxz_to FILE.xz DEST (python's lzma where xz is missing)
  if command -v xz >/dev/null; then xz -dc "$1" > "$2"; else python3 -c 'import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$1" "$2"; fi
}

echo "== machine"
nvidia-smi -L
echo "node on the machine: $(command -v node || echo none) $(node -v 2>/dev/null)"

echo "== vulkan loader"
if ! ldconfig -p | grep -q 'libvulkan.so.1 '; then
  for f in .gl/*.deb; do dpkg -x "$f" /; done
  ldconfig
fi
ldconfig -p | grep libvulkan
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
if [ -f "$icd" ]; then export VK_DRIVER_FILES=$icd VK_ICD_FILENAMES=$icd; fi
ls /usr/local/nvidia/share/vulkan/icd.d /usr/share/vulkan/icd.d /etc/vulkan/icd.d 2>/dev/null

echo "== node"
unxz_to .devcarry/node.xz /tmp/node && chmod +x /tmp/node
unxz_to .devcarry/dawn.node.xz .devcarry/app/node_modules/webgpu/dist/linux-x64/dawn.node
/tmp/node -v

cd .devcarry/app
step() { # step NAME SECONDS ARGS...: the JSON (last stdout line) goes to $OUT/NAME.json
  local name=$1 secs=$2
  shift 2
  echo "== $name"
  local t0=$SECONDS
  timeout "$secs" /tmp/node gpu-check.cjs "$@" | tee "/tmp/$name.txt"
  local rc=${PIPESTATUS[0]}
  echo "($name: exit $rc, $((SECONDS - t0)) s)"
  tail -n 1 "/tmp/$name.txt" > "$OUT/$name.json"
  return "$rc"
}
ulimit -c 0
steps=${*:-select-auto webgpu wasm bench-model-wasm}
[ "$steps" = suite ] && steps="select-auto kernels engine-webgpu engine-wasm bench-model-qwen select-auto-qwen merge"
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
for s in $steps; do
  case $s in
    select-auto) step select-auto 40 select-auto ;;
    select-auto-qwen) step select-auto-qwen 60 select-auto-qwen ;;
    webgpu)
      step webgpu 120 webgpu
      rc=$?
      # A crash (abort, segfault) rather than a timeout: once more, to tell a flaky crash from a steady one.
      if [ "$rc" = 134 ] || [ "$rc" = 139 ]; then step webgpu-retry 120 webgpu; fi
      ;;
    wasm) step wasm 90 wasm ;;
    bench-model-wasm) AGENTJET_BACKEND=wasm step bench-model-wasm 100 bench-model ;;
    bench-model-webgpu) AGENTJET_BACKEND=webgpu step bench-model-webgpu 100 bench-model ;;
    engine-webgpu) step engine-webgpu 90 engine webgpu --bench ;;
    engine-wasm) step engine-wasm 60 engine wasm --bench ;;
    kernels) step kernels 100 kernels ;;
    kernels-quick) step kernels 150 kernels --quick ;;
    bench-model-qwen) AGENTJET_BACKEND=webgpu step bench-model-qwen 230 bench-model-qwen ;; # 50 s more: mixed-precision training, f16-weight decoding
    bench-model-qwen-quick) AGENTJET_BACKEND=webgpu step bench-model-qwen 210 bench-model-qwen --quick ;;
    merge)
      # One dated JSON of every step's result (a step that crashed left its last line, or nothing: kept as text).
      /tmp/node -e '
        const fs = require("fs"), out = process.env.OUT, date = new Date().toISOString().slice(0, 10);
        const merged = { date, machine: process.argv[1] };
        for (const f of fs.readdirSync(out).filter((f) => f.endsWith(".json") && !f.startsWith("gpu-suite-")).sort()) {
          const text = fs.readFileSync(`${out}/${f}`, "utf8").trim();
          try { merged[f.slice(0, -5).replace(/-/g, "_")] = JSON.parse(text); } catch { merged[f.slice(0, -5).replace(/-/g, "_")] = { unparsed: text.slice(0, 2000) }; }
        }
        const w = merged.engine_webgpu, c = merged.engine_wasm;
        if (w && c && w.greedyTokens) merged.engine_tokens_agree = JSON.stringify([w.greedyTokens, w.batchedTokens, w.sampledTokens]) === JSON.stringify([c.greedyTokens, c.batchedTokens, c.sampledTokens]);
        fs.writeFileSync(`${out}/gpu-suite-${date}.json`, JSON.stringify(merged, null, 2) + "\n");
        console.log(`merged ${Object.keys(merged).length - 2} results into gpu-suite-${date}.json`);
      ' "$(nvidia-smi -L 2>/dev/null | head -n 1); $(/tmp/node -v)"
      ;;
    *) echo "unknown step $s" ;;
  esac
done
