#!/usr/bin/env bash
# The built-in model's training run on one GPU machine, as the shipped weights were made (docs/training.md), in a
# time budget: the token streams of that machine's site-packages in a tokenizer trained earlier, pre-training, then
# fine-tuning on conversations rendered earlier, the checkpoint written and packed under OUT in pieces (a device
# call brings back files of at most 16 MiB). Every step's log lands in OUT as it runs.
#
#   experiments/train_builtin.sh SITE_PACKAGES PREPARED WORK OUT SECONDS
#
# PREPARED holds tokenizer.json and conversations/ (train.*, heldout.*) from `python -m warpcode.training render`.
# SECONDS is the whole run's budget: what preparing leaves is split 60/40 between the phases (less a minute for
# start-up, evaluation and export).
set -euo pipefail
SITE=$1 PREPARED=$2 WORK=$3 OUT=$4 BUDGET=$5
mkdir -p "$WORK/conversations" "$OUT"
cp "$PREPARED"/conversations/* "$WORK/conversations/"
start=$SECONDS
python3 -m warpcode.training prepare --site-packages "$SITE" --out "$WORK" --tokenizer "$PREPARED/tokenizer.json" \
  > "$OUT/prepare.log" 2>&1
cp "$WORK/corpus.json" "$OUT/"
left=$((BUDGET - (SECONDS - start) - 60))
minutes() { python3 -c "print(round($left * $1 / 60, 2))"; }
echo "prepare took $((SECONDS - start)) s; $left s left for training" | tee -a "$OUT/prepare.log"
python3 -m warpcode.training pretrain --out "$WORK" --minutes "$(minutes 0.7)" --budget-minutes "$(minutes 0.55)" \
  > "$OUT/pretrain.log" 2>&1
python3 -m warpcode.training finetune --out "$WORK" --minutes "$(minutes 0.45)" --budget-minutes "$(minutes 0.36)" \
  > "$OUT/finetune.log" 2>&1
python3 -m warpcode.training export --out "$WORK" --model-dir "$WORK/model" > "$OUT/export.log" 2>&1
cp "$WORK"/pretrain/result.json "$OUT/pretrain_result.json"
cp "$WORK"/finetune/result.json "$OUT/finetune_result.json"
tar -C "$WORK" -cf - model | split -b 15M - "$OUT/model.tar.part-"
echo "done in $((SECONDS - start)) s" | tee -a "$OUT/export.log"
