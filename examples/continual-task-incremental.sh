#!/usr/bin/env sh
# The task-incremental stream of docs/continual.md: MiniLM-L6 with Houlsby adapters through
# Reuters-R8, 20 Newsgroups, tweets and film reviews (1,000 training examples per stage), each
# strategy with 3 seeds; the sequential runs also train every stage alone (forward transfer).
# One sequence takes tens of minutes on 2 CPU cores; every run writes runs/cl/STRATEGY-SEED.
set -e
STAGES=reuters-r8,20newsgroups,twitter-sentiment,rotten-tomatoes
for seed in 0 1 2; do
  for strategy in sequential replay kd-logit adapter-per-stage; do
    extra=""
    [ "$strategy" = sequential ] && extra="--single-stage"
    adaptlab sequence --model minilm-l6 --stages "$STAGES" --method houlsby \
      --strategy "$strategy" --train-size 1000 --test-size 1000 --epochs 3 \
      --seed "$seed" $extra --out "runs/cl/$strategy-$seed" --no-progress
  done
done
