#!/usr/bin/env bash
# Regenerates the shipped LiveCaptions clips: each clip-N.txt is spoken by espeak-ng in a clear, slow
# voice (-s 120 words per minute, -g 4 = 40 ms pauses between words) and resampled by sox to 16 kHz mono
# 16-bit FLAC. Needs: apt-get install espeak-ng sox. Run from anywhere; writes next to this script.
set -euo pipefail
cd "$(dirname "$0")"
for txt in clip-*.txt; do
    name="${txt%.txt}"
    tmp="$(mktemp --suffix=.wav)"
    espeak-ng -v en-us -s 120 -g 4 -w "$tmp" -f "$txt"
    sox "$tmp" -r 16000 -c 1 -b 16 "$name.flac"
    rm -f "$tmp"
    echo "$name.flac: $(soxi -D "$name.flac") s"
done
