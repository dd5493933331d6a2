#!/usr/bin/env bash
# Issue 27 on a GPU machine (device tool; see docs/results.md for what it gave). PHASES (default AB):
#   A. encoders trained to a stop by validation (at most 50 epochs, patience 3; autoencoder and srl_splits on the
#      small benchmark's random-policy dataset and on a toward-target one; each capped at ENCODER_SECONDS), side by
#      side with raw pixels with and without DrQ's random shift (srl_model.augment=4) at the small benchmark's 250k
#      steps, 3 seeds each, the six runs side by side on one GPU (hardware=gpu), each capped at CAP train seconds;
#   B. the cost of experiment=srl_benchmark (the paper's setting: 224 x 224 images, 30 epochs per encoder, 5M steps x
#      10 seeds x 7 representations), measured on a slice of every step (SLICE_FRAMES frames, 1 epoch, SLICE_STEPS
#      steps, seed 0) through rlzoo.pipeline, and scaled linearly (benchmarks/srl_benchmark_cost.py cost).
# Usage: bash benchmarks/gpu_srl.sh OUT_DIR [PHASES] [CAP_SECONDS] [SLICE_STEPS] [SLICE_FRAMES] [EPOCHS] [ENCODER_SECONDS]
set -uo pipefail
OUT=${1:?usage: gpu_srl.sh OUT_DIR [PHASES] [CAP_SECONDS] [SLICE_STEPS] [SLICE_FRAMES] [EPOCHS] [ENCODER_SECONDS]}
PHASES=${2:-AB}
CAP=${3:-300}
SLICE_STEPS=${4:-8192}
SLICE_FRAMES=${5:-2000}
EPOCHS=${6:-50}
ENCODER_SECONDS=${7:-330}
HARDWARE=${HARDWARE:-gpu}  # HARDWARE=cpu: a dry run of this script without a GPU; B_TIMEOUT=s: a cap on phase B
WORK=${TMPDIR:-/tmp}/rlzoo-gpu-srl
mkdir -p "$OUT" "$WORK/pixels" "$WORK/encoders"
export PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,memory.total --format=csv,noheader; nproc; uptime; } > "$OUT/summary.txt" 2>&1
SMALL_ENV=(env=MobileRobot env.random_target=true env.relative_ground_truth=false)

# One dataset of the small benchmark (its pipeline's collection), then two encoders on it, in the background.
dataset_and_encoders() {  # name, collection overrides...
    local name=$1
    shift
    python -m rlzoo.collect "${SMALL_ENV[@]}" n_samples=20000 image_size=64 n_workers=2 "$@" \
        hydra.run.dir="$WORK/data_$name" >"$WORK/encoders/collect_$name.log" 2>&1 || return
    for method in autoencoder srl_splits; do
        python -m rlzoo.srl.train srl_model=$method dataset="$WORK/data_$name" srl_model.network.channels=32 \
            srl_model.training.epochs="$EPOCHS" srl_model.training.patience=3 progress_bar=false \
            srl_model.training.max_seconds="$ENCODER_SECONDS" \
            hydra.run.dir="$WORK/encoders/${method}_$name" >"$WORK/encoders/${method}_$name.log" 2>&1 &
    done
    wait
}

phase_a() {
started=$SECONDS
pixel_jobs=()
dataset_and_encoders random &
dataset_and_encoders toward collect_policy=toward_target collect_policy.random_fraction=0.85 &
for augment in 0 4; do
    for seed in 0 1 2; do
        python -m rlzoo.train experiment=srl_benchmark_small srl_model=raw_pixels srl_model.augment=$augment \
            seed=$seed hardware="$HARDWARE" max_train_seconds="$CAP" hydra.run.dir="$WORK/pixels/aug${augment}_seed$seed" \
            >"$WORK/pixels/aug${augment}_seed$seed.log" 2>&1 &
        pixel_jobs+=($!)
    done
done
wait "${pixel_jobs[@]}"
echo "A: six raw-pixel runs side by side: $((SECONDS - started)) s wall; load: $(cut -d' ' -f1-3 /proc/loadavg)" \
    | tee -a "$OUT/summary.txt"
python benchmarks/srl_benchmark_cost.py pixels "$WORK/pixels" | tee -a "$OUT/summary.txt"
tail -n 3 "$WORK"/pixels/*.log >> "$OUT/summary.txt" 2>&1
wait
echo "A: encoders done: $((SECONDS - started)) s wall" | tee -a "$OUT/summary.txt"
for folder in "$WORK"/encoders/*/; do
    name=$(basename "$folder")
    tail -n 4 "$WORK/encoders/$name.log" >> "$OUT/summary.txt"
    tar -czf "$OUT/enc_$name.tgz" -C "$WORK/encoders" "$name"
done
}

phase_b() {
started=$SECONDS
timeout "${B_TIMEOUT:-0}" python -m rlzoo.pipeline experiment=srl_benchmark hardware="$HARDWARE" pipeline.dir="$WORK/pipe" \
    pipeline.collect.n_samples="$SLICE_FRAMES" pipeline.srl_train.srl_model.training.epochs=1 \
    total_timesteps="$SLICE_STEPS" checkpoint_freq=0 test_episodes=2 "pipeline.sweep.seed=[0]" \
    pipeline.report=false pipeline.videos=false progress_bar=false +pipeline.srl_train.progress_bar=false \
    >"$WORK/pipeline.log" 2>&1
echo "B: the srl_benchmark slice: $((SECONDS - started)) s wall" | tee -a "$OUT/summary.txt"
grep -a "rlzoo.pipeline\|Error\|error" "$WORK/pipeline.log" | tail -n 40 | tee -a "$OUT/summary.txt"
python benchmarks/srl_benchmark_cost.py cost "$WORK/pipe" | tee -a "$OUT/summary.txt"
}

[[ $PHASES == *A* ]] && phase_a
[[ $PHASES == *B* ]] && phase_b
exit 0
