#!/usr/bin/env bash
# Decompression bombs against `splitpkg plan`: peak RSS (`/usr/bin/time -v`), wall time and exit
# code per bomb. The bombs are tiny on disk and inflate to GiBs of zeros behind a real ELF header
# (a small shared library built with gcc), so the tree reader takes every member for a library.
#
#   under-cap.tar.bz2   N members of SIZE_MIB each (default 6 x 1024 MiB), one bz2 file of ~KB
#   over-cap.tar.bz2    one member of BIG_MIB (default 5120 MiB): above the per-member cap
#   under-cap.whl       N members of SIZE_MIB, deflate (a few MB)
#   over-cap.whl        two members of BIG_MIB (zip64), deflate (~10 MB)
#
# Usage: bench/bomb.sh [SPLITPKG...]   (default target/release/splitpkg; several binaries compare)
# Env: N (6), SIZE_MIB (1024), BIG_MIB (5120), BOMBS (directory for the bombs; default a temp dir)
# Results are printed and appended to bench/results/bomb.txt. Needs python3, gcc, /usr/bin/time.
# The "before" numbers of docs/security.md are from the binary before the caps (commit 79b1164).
set -euo pipefail
cd "$(dirname "$0")/.."
(($# == 0)) && set -- target/release/splitpkg
n=${N:-6}
size=${SIZE_MIB:-1024}
big=${BIG_MIB:-5120}
dir=${BOMBS:-$(mktemp -d)}
mkdir -p "$dir" bench/results
printf 'const char *bomb_name = "libbomb_payload.so";\nint bomb(void) { return 42; }\n' > "$dir/bomb.c"
gcc -shared -fPIC -o "$dir/libbomb.so" "$dir/bomb.c"

python3 - "$dir" "$n" "$size" "$big" <<'EOF'
import bz2, io, os, struct, sys, tarfile, zlib
d, n, size, big = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]) << 20, int(sys.argv[4]) << 20
elf0 = open(os.path.join(d, "libbomb.so"), "rb").read()

def widened(size):
    # The library's .rodata made to span the rest of the member (the zeros): the literal scan then
    # reads every inflated byte, so each member stays in memory while it is parsed, as a real
    # 450 MB library does.
    e = bytearray(elf0)
    shoff, = struct.unpack_from("<Q", e, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", e, 0x3a)
    strtab = struct.unpack_from("<Q", e, shoff + shstrndx * shentsize + 0x18)[0]
    for i in range(shnum):
        o = shoff + i * shentsize
        name = struct.unpack_from("<I", e, o)[0]
        if e[strtab + name:].startswith(b".rodata\0"):
            off = struct.unpack_from("<Q", e, o + 0x18)[0]
            struct.pack_into("<Q", e, o + 0x20, size - off)
    return bytes(e)
CH = 64 << 20
zeros = bytes(CH)

def tar_bz2(path, members):
    # Concatenated bz2 streams (MultiBzDecoder reads them as one): each member's header and ELF
    # head, then one pre-compressed 64 MiB block of zeros repeated.
    zbz = bz2.compress(zeros, 9)
    with open(path, "wb") as f:
        def add(name, data_len, head):
            ti = tarfile.TarInfo(name); ti.size = data_len; ti.mode = 0o755
            rest = data_len - len(head)
            first = rest % CH
            f.write(bz2.compress(ti.tobuf(format=tarfile.GNU_FORMAT) + head + bytes(first), 9))
            for _ in range(rest // CH):
                f.write(zbz)
            pad = (-data_len) % 512
            if pad:
                f.write(bz2.compress(bytes(pad)))
        idx = b'{"name": "libtorch", "version": "0.0.1", "build": "bomb_0", "build_number": 0, "subdir": "linux-64"}'
        add("info/index.json", len(idx), idx)
        for i, (name, sz) in enumerate(members):
            add(name, sz, widened(sz))
        f.write(bz2.compress(bytes(1024)))

def deflate_zeros_chunk():
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    return c.compress(zeros) + c.flush(zlib.Z_FULL_FLUSH)

def whl(path, members):
    # Raw deflate: the ELF head, then one 64 MiB block of zeros compressed after a full flush
    # (which resets the compressor, so the same bytes can be repeated), then the final block.
    zc = deflate_zeros_chunk()
    zero_crc = {}
    entries = []
    with open(path, "wb") as f:
        for name, sz in members:
            elf = widened(sz)
            rest = sz - len(elf)
            first = rest % CH
            c = zlib.compressobj(9, zlib.DEFLATED, -15)
            head = c.compress(elf + bytes(first)) + c.flush(zlib.Z_FULL_FLUSH)
            crc = zlib.crc32(elf + bytes(first))
            for _ in range(rest // CH):
                crc = zlib.crc32(zeros, crc)
            tail = zlib.compressobj(9, zlib.DEFLATED, -15).flush(zlib.Z_FINISH)
            csize = len(head) + len(zc) * (rest // CH) + len(tail)
            off = f.tell()
            nm = name.encode()
            extra = struct.pack("<HHQQ", 1, 16, sz, csize)
            f.write(struct.pack("<IHHHHHIIIHH", 0x04034b50, 45, 0, 8, 0, 0x21, crc, 0xFFFFFFFF, 0xFFFFFFFF, len(nm), len(extra)) + nm + extra)
            f.write(head)
            for _ in range(rest // CH):
                f.write(zc)
            f.write(tail)
            entries.append((nm, crc, csize, sz, off))
        meta = b"Metadata-Version: 2.1\nName: torch\nVersion: 0.0.1\n\n"
        nm = b"torch-0.0.1.dist-info/METADATA"
        off = f.tell()
        f.write(struct.pack("<IHHHHHIIIHH", 0x04034b50, 20, 0, 0, 0, 0x21, zlib.crc32(meta), len(meta), len(meta), len(nm), 0) + nm + meta)
        cd_start = f.tell()
        for nm2, crc, csize, sz, off2 in entries:
            extra = struct.pack("<HHQQQ", 1, 24, sz, csize, off2)
            f.write(struct.pack("<IHHHHHHIIIHHHHHII", 0x02014b50, (3 << 8) | 45, 45, 0, 8, 0, 0x21, crc, 0xFFFFFFFF, 0xFFFFFFFF,
                                len(nm2), len(extra), 0, 0, 0, 0o100755 << 16, 0xFFFFFFFF) + nm2 + extra)
        f.write(struct.pack("<IHHHHHHIIIHHHHHII", 0x02014b50, (3 << 8) | 20, 20, 0, 0, 0, 0x21, zlib.crc32(meta), len(meta), len(meta),
                            len(nm), 0, 0, 0, 0, 0o100644 << 16, off) + nm)
        cd_end = f.tell()
        count = len(entries) + 1
        f.write(struct.pack("<IQHHIIQQQQ", 0x06064b50, 44, 45, 45, 0, 0, count, count, cd_end - cd_start, cd_start))
        f.write(struct.pack("<IIQI", 0x07064b50, 0, cd_end, 1))
        f.write(struct.pack("<IHHHHIIH", 0x06054b50, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0))

tar_bz2(os.path.join(d, "under-cap.tar.bz2"), [(f"lib/libbomb{i}.so", size) for i in range(n)])
tar_bz2(os.path.join(d, "over-cap.tar.bz2"), [("lib/libbomb.so", big)])
whl(os.path.join(d, "under-cap.whl"), [(f"torch/lib/libbomb{i}.so", size) for i in range(n)])
whl(os.path.join(d, "over-cap.whl"), [(f"torch/lib/libbomb{i}.so", big) for i in range(2)])
EOF

out=bench/results/bomb.txt
{
  echo "# $(date -u +%FT%TZ) $(uname -n) $(nproc) cores, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo); N=$n SIZE_MIB=$size BIG_MIB=$big"
  for bin in "$@"; do
    for b in under-cap.tar.bz2 over-cap.tar.bz2 under-cap.whl over-cap.whl; do
      set +e
      /usr/bin/time -v "$bin" plan --quiet --json "$dir/$b" > /dev/null 2> "$dir/time.txt"
      rc=$?
      set -e
      rss=$(awk -F': ' '/Maximum resident set size/ { printf "%.0f", $2 / 1024 }' "$dir/time.txt")
      wall=$(awk -F': ' '/Elapsed \(wall clock\)/ { print $2 }' "$dir/time.txt")
      err=$(grep -m1 'splitpkg: error' "$dir/time.txt" | cut -c1-150 || true)
      printf '%-28s %-18s %8s bytes  exit %-3s max RSS %6s MiB  wall %s  %s\n' "$bin" "$b" "$(stat -c %s "$dir/$b")" "$rc" "$rss" "$wall" "$err"
    done
  done
} | tee -a "$out"
[[ -n ${BOMBS:-} ]] || rm -rf "$dir"
