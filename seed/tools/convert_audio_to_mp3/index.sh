#!/usr/bin/env bash
# convert_audio_to_mp3: convert an audio file to MP3 with ffmpeg.
# Contract (docs/tool-format.md, "Entry files"): params arrive as env INPUT_<NAME>, a line on fd 3 is a
# progress update, stdout is the result text and a non-zero exit status means isError.
set -uo pipefail

INPUT="${INPUT_INPUT_PATH:-}"
OUTPUT="${INPUT_OUTPUT_PATH:-}"
BITRATE="${INPUT_BITRATE:-192k}"
OUT_DIR="${TOOL_OUTPUT_DIR:-}"

FFMPEG_PID=""
PART=""
WORK=""

# Progress goes to fd 3 only when the runner opened it (running by hand works too).
if { true >&3; } 2>/dev/null; then
  progress() { printf '%s\n' "$*" >&3; }
else
  progress() { :; }
fi

# Errors are the result text (stdout) plus a non-zero exit.
fail() {
  printf 'Error: %s\n' "$*"
  exit 1
}

cleanup() {
  [[ -n "$PART" && -e "$PART" ]] && rm -f -- "$PART"
  [[ -n "$WORK" && -d "$WORK" ]] && rm -rf -- "$WORK"
  return 0
}

on_cancel() {
  # Cancellation: stop ffmpeg, drop the half-written file, exit non-zero.
  if [[ -n "$FFMPEG_PID" ]]; then
    kill -TERM "$FFMPEG_PID" 2>/dev/null
    wait "$FFMPEG_PID" 2>/dev/null
  fi
  cleanup
  printf 'cancelled\n'
  exit 143
}
trap on_cancel TERM INT
trap cleanup EXIT

human_size() {
  awk -v b="$1" 'BEGIN {
    if (b < 1024) printf "%d bytes", b;
    else if (b < 1048576) printf "%.1f KiB", b / 1024;
    else printf "%.1f MiB", b / 1048576 }'
}

human_duration() {
  awk -v s="$1" 'BEGIN { h = int(s / 3600); m = int((s - h * 3600) / 60);
    printf "%d:%02d:%05.2f", h, m, s - h * 3600 - m * 60 }'
}

# Bitrate of the first audio stream in bit/s (empty when unknown).
probe_bitrate() {
  command -v ffprobe >/dev/null 2>&1 || return 0
  ffprobe -v error -select_streams a:0 -show_entries stream=bit_rate \
    -of default=noprint_wrappers=1:nokey=1 -i "file:$1" 2>/dev/null | awk '/^[0-9]+$/ { print; exit }'
}

probe_duration() {
  command -v ffprobe >/dev/null 2>&1 || return 0
  ffprobe -v error -show_entries format=duration -of default=noprint_wrappers=1:nokey=1 \
    -i "file:$1" 2>/dev/null | awk '/^[0-9.]+$/ { print; exit }'
}

# ---------------------------------------------------------------- checks

command -v ffmpeg >/dev/null 2>&1 ||
  fail "ffmpeg is not installed on the machine that runs the tools; install it (Debian/Ubuntu: apt-get install ffmpeg) and try again"

[[ -n "$INPUT" ]] || fail "input_path is required: the path of the audio file to convert"
[[ -e "$INPUT" ]] || fail "input file not found: $INPUT (is the path right, and visible to the tool's sandbox?)"
[[ -f "$INPUT" ]] || fail "input_path is not a regular file: $INPUT"
[[ -r "$INPUT" ]] || fail "input file is not readable: $INPUT"

case "$BITRATE" in
  64k | 128k | 192k | 256k | 320k) ;;
  *) fail "bitrate must be one of 64k, 128k, 192k, 256k, 320k (got '$BITRATE')" ;;
esac

# Output path: inside TOOL_OUTPUT_DIR when the runner provides one, so the file becomes a
# downloadable artifact; a path outside it keeps only its file name.
base="$(basename -- "$INPUT")"
default_name="${base%.*}.mp3"
[[ "$default_name" == ".mp3" ]] && default_name="$base.mp3"
if [[ -z "$OUTPUT" ]]; then
  OUTPUT="${OUT_DIR:-.}/$default_name"
elif [[ -n "$OUT_DIR" ]]; then
  case "$OUTPUT" in
    "$OUT_DIR"/*) ;;
    /*) OUTPUT="$OUT_DIR/$(basename -- "$OUTPUT")" ;;
    *) OUTPUT="$OUT_DIR/$OUTPUT" ;;
  esac
fi
[[ "$OUTPUT" == */ ]] && OUTPUT="$OUTPUT$default_name"
case "/$OUTPUT/" in
  */../*) fail "output_path must not contain '..': $OUTPUT" ;;
esac
out_dir="$(dirname -- "$OUTPUT")"
mkdir -p -- "$out_dir" 2>/dev/null || fail "cannot create the output folder $out_dir"
if [[ -e "$OUTPUT" && "$(realpath -- "$OUTPUT")" == "$(realpath -- "$INPUT")" ]]; then
  fail "output_path must differ from input_path"
fi

WORK="$(mktemp -d 2>/dev/null || mktemp -d -p "$out_dir")" || fail "cannot create a temporary folder"
PART="$OUTPUT.part"

# ---------------------------------------------------------------- convert

duration="$(probe_duration "$INPUT")"
if command -v ffprobe >/dev/null 2>&1; then
  streams="$(ffprobe -v error -select_streams a -show_entries stream=codec_name \
    -of default=noprint_wrappers=1:nokey=1 -i "file:$INPUT" 2>&1)" ||
    fail "ffprobe cannot read $INPUT (not an audio file?): $(printf '%s' "$streams" | tail -n 3)"
  [[ -n "$streams" ]] || fail "$INPUT contains no audio stream"
fi

if [[ -n "$duration" ]]; then
  progress "converting $(basename -- "$INPUT") ($(human_duration "$duration")) to MP3 at $BITRATE"
else
  progress "converting $(basename -- "$INPUT") to MP3 at $BITRATE"
fi

# ffmpeg's -progress output (key=value lines) becomes at most one update per 10 %.
report_progress() {
  local last=-1 key value seconds pct
  while IFS='=' read -r key value; do
    [[ "$key" == out_time_us || "$key" == out_time_ms ]] || continue
    [[ -n "$duration" && "$value" =~ ^[0-9]+$ ]] || continue
    seconds=$((value / 1000000))
    pct="$(awk -v s="$value" -v d="$duration" 'BEGIN { p = int(s / 1e6 * 100 / d); if (p > 100) p = 100; print p - p % 10 }')"
    if ((pct > last)); then
      last=$pct
      progress "converted ${pct}% (${seconds} s of $(human_duration "$duration"))"
    fi
  done
}

# Started in the background so the TERM trap can run (and kill it) while we wait. The
# file: prefix stops ffmpeg from reading "name:with:colons" as a protocol.
ffmpeg -hide_banner -nostdin -y -i "file:$INPUT" -map 0:a:0 -vn -codec:a libmp3lame -b:a "$BITRATE" \
  -map_metadata 0 -id3v2_version 3 -f mp3 -progress "pipe:1" -nostats -loglevel error \
  "file:$PART" 2>"$WORK/ffmpeg.log" > >(report_progress) &
FFMPEG_PID=$!
wait "$FFMPEG_PID"
status=$?
FFMPEG_PID=""
if ((status != 0)); then
  fail "ffmpeg failed (exit $status) converting $INPUT: $(tail -n 5 "$WORK/ffmpeg.log" 2>/dev/null)"
fi
mv -f -- "$PART" "$OUTPUT" || fail "cannot write $OUTPUT"
PART=""

# ---------------------------------------------------------------- result

size="$(stat -c %s -- "$OUTPUT" 2>/dev/null || wc -c <"$OUTPUT")"
out_duration="$(probe_duration "$OUTPUT")"
progress "done: $(human_size "$size")"

echo "Converted $INPUT to MP3."
echo "Output: $OUTPUT"
echo "Size: $size bytes ($(human_size "$size"))"
if [[ -n "$out_duration" ]]; then
  echo "Duration: $(human_duration "$out_duration") ($out_duration s)"
fi
# MP3 caps the bitrate at low sample rates (160k below 32 kHz): say what was written.
actual_bitrate="$(probe_bitrate "$OUTPUT")"
actual_k="${actual_bitrate:+$((actual_bitrate / 1000))k}"
if [[ -n "$actual_k" && "$actual_k" != "$BITRATE" ]]; then
  echo "Bitrate: $actual_k ($BITRATE requested; the most MP3 allows at this sample rate)"
else
  echo "Bitrate: $BITRATE"
fi
if [[ -n "$OUT_DIR" ]]; then
  echo "The file is attached to this run as the artifact ${OUTPUT#"$OUT_DIR"/}."
fi
