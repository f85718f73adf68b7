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
for s in $steps; do
  case $s in
    select-auto) step select-auto 40 select-auto ;;
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
    engine-wasm) step engine-wasm 90 engine wasm --bench ;;
    *) echo "unknown step $s" ;;
  esac
done
