// The order in which an issue queue hands out line slots: round robin among the resident blocks'
// ops (each block's ops in program order), on its own and on one SM of a GPU.
#include <gtest/gtest.h>

#include "cais/gpu/issue_queue.h"
#include "hopper_test_util.h"

namespace cais::gpu::test {
namespace {

// The ops a queue serves, one turn each, until `turns` were taken; an op ends after `len` turns.
std::vector<std::uint32_t> serve(IssueQueue& q, std::size_t turns, std::uint32_t len) {
  std::vector<std::uint32_t> order, taken(64, 0);
  while (order.size() < turns && q.rotating()) {
    const std::uint32_t oi = q.at(0);
    order.push_back(oi);
    q.turn_taken(0);
    if (++taken[oi] == len) q.pop(oi);
  }
  return order;
}

TEST(IssueQueue, StreamsTakeTurnsRoundRobinAndEachStreamKeepsProgramOrder) {
  IssueQueue q;
  q.push(0, 7);   // stream 7: ops 0, then 1
  q.push(1, 7);
  q.push(2, 9);   // stream 9: op 2
  q.push(3, 11);  // stream 11: op 3
  EXPECT_EQ(q.rotating(), 3u);  // only the heads
  const auto order = serve(q, 100, 2);
  // 0 2 3 | 0 2 3 (0 and 2 end; 1 joins last in the round) | 1 | 1
  EXPECT_EQ(order, (std::vector<std::uint32_t>{0, 2, 3, 0, 2, 3, 1, 1}));
  EXPECT_TRUE(q.empty());
}

TEST(IssueQueue, AtMostTheOpenLimitOfOpsAreCutAtOnceTheOthersWaitOldestFirst) {
  IssueQueue q;
  q.set_open_limit(2);
  for (std::uint32_t i = 0; i < 4; ++i) q.push(i, i);
  EXPECT_EQ(q.rotating(), 2u);
  const auto order = serve(q, 100, 2);
  EXPECT_EQ(order, (std::vector<std::uint32_t>{0, 1, 0, 1, 2, 3, 2, 3}));
}

TEST(IssueQueue, ANewcomerIsServedLastInTheCurrentRound) {
  IssueQueue q;
  q.push(0, 0);
  q.push(1, 1);
  q.push(2, 2);
  q.turn_taken(0);  // op 0 served: the cursor is at op 1
  q.push(3, 3);
  std::vector<std::uint32_t> round;
  for (std::size_t k = 0; k < q.rotating(); ++k) round.push_back(q.at(k));
  EXPECT_EQ(round, (std::vector<std::uint32_t>{1, 2, 0, 3}));
}

// Block b (of `blocks` on one SM) loads 512 lines of 128 B at b x 64 KiB from GPU 1.
proto::Configure resident_loads(std::uint32_t blocks, isa::Opcode op, std::uint32_t limit, std::uint32_t bulk) {
  auto wl = one_kernel(2, blocks);
  wl.mutable_launches(0)->add_gpus(0);
  mem(wl, op, 512, 128, 128, 0, 1)->mutable_addr()->set_block_x(65536);
  proto::Configure c = make_config(wl, 2, true);
  (*c.mutable_params())["gpu.num_sms"].set_i(1);
  (*c.mutable_params())["gpu.max_outstanding_per_sm"].set_i(limit);
  (*c.mutable_params())["gpu.bulk_lines"].set_i(bulk);
  return c;
}

std::uint32_t block_of(std::uint64_t addr) { return static_cast<std::uint32_t>((addr - unicast_addr(1, 0)) / 65536); }

TEST(Hopper, ResidentBlocksOfAnSmInterleaveTheirLoadsLineByLineAndFinishTogether) {
  // Two blocks on one SM, each a 512-line load, 256 lines in flight at most. Block 0 issues
  // first and takes the 256 free slots; from then on every slot a response frees goes to the
  // other block in turn (the old queue cut block 0's load whole before block 1's first line).
  seen().clear();
  HostedModel m;
  auto st = run_config(m, resident_loads(2, isa::LD_REMOTE, 256, 1));
  std::vector<std::uint32_t> order;
  for (const auto& x : seen())
    if (x.type == proto::PKT_READ_REQ) order.push_back(block_of(x.addr));
  ASSERT_EQ(order.size(), 1024u);
  std::size_t switches = 0;
  for (std::size_t i = 257; i < 768; ++i) switches += order[i] != order[i - 1];
  EXPECT_GT(switches, 500u);  // alternating line by line once both blocks issue
  std::size_t last[2] = {0, 0};
  for (std::size_t i = 0; i < order.size(); ++i) last[order[i]] = i;
  EXPECT_GT(last[0], 760u);  // block 0's last line near the end too (old queue: 511)
  EXPECT_EQ(last[1], 1023u);
  EXPECT_EQ(st["gpu0.rx.READ_RESP.packets"], 1024);
}

TEST(Hopper, BulkPacketsOfInterleavedOpsNeverMixOpsAndLeaveWhole) {
  // The same with ld.cais in bulk packets of 4 lines and a limit that is not a multiple of 4:
  // every packet holds 4 lines of one block's load, the blocks' packets interleave, and no
  // partly filled packet keeps the queue from its limit (the run ends).
  seen().clear();
  HostedModel m;
  auto st = run_config(m, resident_loads(3, isa::LD_CAIS, 62, 4));
  std::vector<std::uint32_t> order;
  for (const auto& x : seen()) {
    if (x.type != proto::PKT_CAIS_LD_REQ) continue;
    ASSERT_EQ(x.line_addrs.size(), 4u);
    EXPECT_EQ(x.count, 4u * 128);
    for (std::uint64_t a : x.line_addrs) EXPECT_EQ(block_of(a), block_of(x.addr));
    order.push_back(block_of(x.addr));
  }
  ASSERT_EQ(order.size(), 3u * 512 / 4);
  std::size_t switches = 0;
  for (std::size_t i = 1; i < order.size(); ++i) switches += order[i] != order[i - 1];
  EXPECT_GT(switches, order.size() / 2);
  EXPECT_EQ(st["gpu0.rx.CAIS_LD_RESP.packets"], 3 * 512);
}

TEST(Hopper, AMergedOpSendsALineItCoversOnlyInPartAlone) {
  // ld.cais of 64 rows of 192 B every 320 B (rows that are not whole 128 B lines): each row has
  // a whole line and a 64 B part of one, which the row before or after shares on another op in
  // a real kernel. With 4-line bulks the whole lines travel in bulks of whole lines, every part
  // alone, so that each line has one packet shape whichever op sends it (the merge unit matches
  // a bulk request by its lines). Three participants: the switch merges these requests.
  auto wl = one_kernel(2, 1);
  wl.mutable_launches(0)->add_gpus(0);
  wl.mutable_kernels(0)->mutable_cais()->set_num_gpus(3);
  mem(wl, isa::LD_CAIS, 64, 192, 320, 0, 1);
  proto::Configure c = make_config(wl, 2, true);
  (*c.mutable_params())["gpu.num_sms"].set_i(1);
  (*c.mutable_params())["gpu.bulk_lines"].set_i(4);
  seen().clear();
  HostedModel m;
  run_config(m, c);
  std::size_t parts = 0, whole = 0, bulks = 0;
  for (const auto& x : seen()) {
    if (x.type != proto::PKT_CAIS_LD_REQ) continue;
    EXPECT_EQ(x.aux, 2u);
    const std::size_t lines = std::max<std::size_t>(1, x.line_addrs.size());
    if (x.count == 64) {
      EXPECT_EQ(lines, 1u);
      ++parts;
    } else {
      EXPECT_EQ(x.count, lines * 128);
      whole += lines;
      bulks += lines > 1;
    }
  }
  EXPECT_EQ(parts, 64u);
  EXPECT_EQ(whole, 64u);
  EXPECT_GT(bulks, 0u);
}

TEST(Hopper, ABlocksLaterOpNeverOvertakesItsEarlierOpWhileAnotherBlockInterleaves) {
  // Block 0 issues two async loads back to back, block 1 one load: block 0's second load's
  // first line leaves after its first load's last line, and block 1's lines go in between.
  auto wl = one_kernel(2, 2);
  wl.mutable_launches(0)->add_gpus(0);
  for (int i = 0; i < 2; ++i) {
    auto* ld = mem(wl, isa::LD_REMOTE, 256, 128, 128, 32768 * i, 1);
    ld->mutable_addr()->set_block_x(65536);
    ld->set_is_async(true);
  }
  add(wl, isa::WAIT)->set_count(0);
  proto::Configure c = make_config(wl, 2, true);
  (*c.mutable_params())["gpu.num_sms"].set_i(1);
  seen().clear();
  HostedModel m;
  run_config(m, c);
  // ops: block 0 first load (0), second load (1); block 1's two loads (2, 3)
  std::vector<std::uint32_t> order;
  for (const auto& x : seen())
    if (x.type == proto::PKT_READ_REQ) {
      const std::uint64_t off = x.addr - unicast_addr(1, 0);
      order.push_back(static_cast<std::uint32_t>(off / 65536 * 2 + off % 65536 / 32768));
    }
  ASSERT_EQ(order.size(), 4u * 256);
  std::size_t last[4] = {0, 0, 0, 0}, first[4] = {9999, 9999, 9999, 9999};
  for (std::size_t i = 0; i < order.size(); ++i) {
    last[order[i]] = i;
    first[order[i]] = std::min(first[order[i]], i);
  }
  EXPECT_LT(last[0], first[1]);
  EXPECT_LT(last[2], first[3]);
  EXPECT_LT(first[2], last[0]);  // block 1 interleaves with block 0's first load
}

}  // namespace
}  // namespace cais::gpu::test
