// The portable attention kernel's tile geometry (kernels/attention.hpp), apart from the
// kernel so that the time model prices the work the tiles really do: a query tile stacks
// R rows of each of the `group` query heads sharing a kv head (M = group x R rows, padded
// to a multiple of 16), a key block is 64 keys, the head dim is padded to a multiple of 16.
// Padding rows and columns are computed and thrown away: a tile does M hp of work for
// group R h of useful work.
#pragma once

namespace minilst::kernels {

constexpr int kKeyBlock = 64;  // keys per block
constexpr int kRowTile = 64;   // query rows of a tile (all heads of a group together)

constexpr int round_up(int x, int m) { return (x + m - 1) / m * m; }

struct AttnTiles {
  int h, hp;      // head dim, padded to a multiple of 16
  int group;      // query heads per kv head
  int R;          // query rows per head in a block
  int M;          // rows of a stacked query tile (group x R, padded to a multiple of 16)
  int Bk = kKeyBlock;
  constexpr AttnTiles(int head_dim, int heads_per_kv)
      : h(head_dim), hp(round_up(head_dim, 16)), group(heads_per_kv),
        R((kRowTile + heads_per_kv - 1) / heads_per_kv), M(round_up(heads_per_kv * R, 16)) {}

  // The tile products' work over the useful work: M hp / (group R h) (1 without padding;
  // 80 / 66 for 3 query heads per kv head).
  constexpr double padding() const { return double(M) * hp / (double(group) * R * h); }
};

}  // namespace minilst::kernels
