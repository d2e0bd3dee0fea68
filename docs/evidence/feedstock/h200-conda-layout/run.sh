#!/bin/bash
# Device run (issue 24 item 5): the installed torch 2.11 (pip layout) rearranged into the
# conda-forge layout: libraries in $P/lib, site-packages/torch/lib/* absolute symlinks to them
# (as the feedstock's build.sh makes them), the CUDA libraries of the nvidia-* wheels linked into
# $P/lib, a conda-meta/ directory; no bin/python (the venv's python is given with --python).
set -u
B=$(cd "$(dirname "$0")" && pwd); S=$B/splitpkg
T=/opt/torch/.venv/lib/python3.12/site-packages; PY=/opt/torch/.venv/bin/python
P=/tmp/cf-prefix; SP=$P/lib/python3.12/site-packages
rm -rf $P; mkdir -p $P/conda-meta $SP
echo "== rearrange ($(date -u +%T))"
cp -a $T/torch $SP/
for f in $SP/torch/lib/*; do n=$(basename $f); mv $f $P/lib/$n; ln -sf $P/lib/$n $f; done
# Only the CUDA library directories torch's own DT_RPATH names (in its order, the first copy of a
# name wins, as in ld.so): linking every nvidia-* wheel's libraries brought in CUDA 12 cuFFT
# libraries that torch 2.11+cu130 never loads, which smoke's device_code check then failed.
for e in $(readelf -dW $P/lib/libtorch_cuda.so | sed -n 's/.*(RPATH).*\[\(.*\)\]/\1/p' | tr : ' '); do
  d=${e/\$ORIGIN/$T/torch/lib}; [[ $d == $T/torch/lib* && -d $d ]] || continue
  for f in $d/*.so*; do [[ -e $P/lib/$(basename $f) ]] || ln -s $(readlink -f $f) $P/lib/$(basename $f); done
done
ls -la $SP/torch/lib | head -5; ls $P/lib | wc -l
echo "== plan PREFIX ($(date -u +%T))"; $S plan $P --quiet > $OUT/plan-prefix.txt 2>&1; echo "exit $?" >> $OUT/plan-prefix.txt; cat $OUT/plan-prefix.txt | head -30
echo "== plan site-packages/torch ($(date -u +%T))"; $S plan $SP/torch --quiet > $OUT/plan-site-packages-torch.txt 2>&1; echo "exit $?" >> $OUT/plan-site-packages-torch.txt; head -30 $OUT/plan-site-packages-torch.txt
echo "== smoke --variant magma=PREFIX --python ($(date -u +%T))"
$S smoke --variant magma=$P --python $PY --deadline 300 --json --out $OUT/smoke.json > $OUT/smoke.txt 2>&1; echo "exit $?" >> $OUT/smoke.txt; tail -25 $OUT/smoke.txt
echo "== done ($(date -u +%T))"
