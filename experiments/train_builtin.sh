#!/usr/bin/env bash
# The built-in model's training run on one GPU machine, as the shipped weights were made (README "Training the
# built-in model"), in a time budget: the token streams of that machine's site-packages in a tokenizer trained
# earlier, the trajectories rendered as conversations, pre-training, then fine-tuning, the checkpoint written and
# packed under OUT in pieces (a device call brings back files of at most 16 MiB). Every step's log lands in OUT as it
# runs; OUT/done marks the end.
#
#   experiments/train_builtin.sh SITE_PACKAGES PREPARED WORK OUT SECONDS
#
# PREPARED holds tokenizer.json, settings.json and either conversations/ (train.*, heldout.*) from
# `python -m warpcode.training render`, or trajectories/*.jsonl.gz, rendered here on every core while the corpus is
# prepared (compressed, 10,000 trajectories travel in 6 MB; rendered, in 110 MB).
# On a lent GPU machine, keep WORK and OUT outside the repository's copy (/tmp): a later call's copy of the working
# tree removed the ignored folders in it, and with them a run started in the background by an earlier call.
# SECONDS is the whole run's budget. Less a minute for evaluation and export, pre-training is 42% of what preparing
# leaves, fine-tuning 85% of what is left after pre-training (a phase overruns its length by its evaluations).
set -euo pipefail
SITE=$1 PREPARED=$2 WORK=$3 OUT=$4 BUDGET=$5
mkdir -p "$WORK" "$OUT"
start=$SECONDS
rendering=""
if [ ! -d "$PREPARED/conversations" ]; then
  python3 -m warpcode.training render --out "$PREPARED" --trajectories "$PREPARED"/trajectories/*.jsonl.gz \
    --workers "$(nproc)" > "$OUT/render.log" 2>&1 &
  rendering=$!
fi
python3 -m warpcode.training prepare --site-packages "$SITE" --out "$WORK" --tokenizer "$PREPARED/tokenizer.json" \
  > "$OUT/prepare.log" 2>&1
if [ -n "$rendering" ]; then wait "$rendering"; fi
cp -r "$PREPARED/conversations" "$WORK/"
cp "$WORK/corpus.json" "$OUT/"
left=$((BUDGET - (SECONDS - start) - 60))
minutes() { python3 -c "print(round($left * $1 / 60, 2))"; }
echo "prepare and render took $((SECONDS - start)) s; $left s left for training" | tee -a "$OUT/prepare.log"
python3 -m warpcode.training pretrain --out "$WORK" --minutes "$(minutes 0.55)" --budget-minutes "$(minutes 0.42)" \
  > "$OUT/pretrain.log" 2>&1
left=$((BUDGET - (SECONDS - start) - 60))
python3 -m warpcode.training finetune --out "$WORK" --minutes "$(minutes 1)" --budget-minutes "$(minutes 0.85)" \
  > "$OUT/finetune.log" 2>&1
python3 -m warpcode.training export --out "$WORK" --model-dir "$WORK/model" > "$OUT/export.log" 2>&1
cp "$WORK"/pretrain/result.json "$OUT/pretrain_result.json"
cp "$WORK"/finetune/result.json "$OUT/finetune_result.json"
tar -C "$WORK" -cf - model | split -b 15M - "$OUT/model.tar.part-"
echo "done in $((SECONDS - start)) s" | tee -a "$OUT/export.log"
touch "$OUT/done"
