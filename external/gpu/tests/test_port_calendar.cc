// The SM port's calendar (port_calendar.h) and what it changes in the local memory system: a
// load's data crosses the port after its latency, a store's when issued, and neither waits for
// a booking later than itself.
#include <gtest/gtest.h>

#include "cais/gpu/local_memory.h"
#include "cais/gpu/port_calendar.h"

namespace cais::gpu {
namespace {

TEST(PortCalendar, BookingsInTimeOrderQueueAsOneServer) {
  PortCalendar p;
  EXPECT_EQ(p.reserve(0, 0, 100, 1.0), 100);
  EXPECT_EQ(p.reserve(10, 10, 100, 1.0), 200);  // waits for the first
  EXPECT_EQ(p.reserve(500, 500, 50, 1.0), 550);  // idle port
  EXPECT_EQ(p.bytes(), 250u);
}

TEST(PortCalendar, AStoreCrossesBeforeALoadBookedForItsReturn) {
  PortCalendar p;
  EXPECT_EQ(p.reserve(0, 400, 100, 1.0), 500);  // a load's data returns at 400
  EXPECT_EQ(p.reserve(10, 10, 100, 1.0), 110);   // a store issued at 10 does not wait for it
  EXPECT_EQ(p.reserve(20, 20, 100, 1.0), 210);
  // a third 100 B transfer from 250: 150 ps of the gap before the load, then after it
  EXPECT_EQ(p.reserve(250, 250, 200, 1.0), 550);
}

TEST(PortCalendar, ATransferFillsTheGapsBetweenBookingsAndEndsWithItsLastByte) {
  PortCalendar p;
  p.reserve(0, 100, 200, 2.0);  // [100, 200)
  p.reserve(0, 300, 200, 2.0);  // [300, 400)
  // 500 B = 250 ps from 0: [0, 100) + [200, 300) + [400, 450)
  EXPECT_EQ(p.reserve(0, 0, 500, 2.0), 450);
  EXPECT_EQ(p.intervals(), 1u);  // all merged into [0, 450)
  EXPECT_EQ(p.reserve(50, 50, 2, 2.0), 451);
}

TEST(PortCalendar, FinishedBookingsAreDroppedSoOnlyThoseInFlightAreKept) {
  PortCalendar p;
  for (TimePs t = 0; t < 100'000; t += 1000) p.reserve(t, t + 300, 10, 1.0);  // a load each microsecond
  EXPECT_LE(p.intervals(), 1u);
  EXPECT_EQ(p.reserve(100'000, 100'000, 0, 1.0), 100'000);  // nothing to move: done at once
}

HopperConfig fast_memory() {
  HopperConfig c;
  c.num_sms = 1;
  c.l2_bytes = 1 << 20;
  c.l2_bytes_per_ps = 100.0;  // L2 and HBM far faster than one SM's port, as on an H100
  c.hbm_bytes_per_ps = 100.0;
  c.sm_load_bytes_per_ps = 0.1;
  c.sm_store_bytes_per_ps = 0.1;
  c.l2_latency_ps = 150;
  c.hbm_latency_ps = 200;
  return c;
}

TEST(LocalMemory, ALoadsBytesCrossThePortAfterItsLatencyNotDuringIt) {
  const HopperConfig c = fast_memory();
  LocalMemory m(c);
  // 1000 B miss: HBM starts serving it at once, its first bytes arrive 200 + 150 ps later and
  // then take 10 000 ps through the port (the old booking at issue hid the latency under them)
  EXPECT_EQ(m.access(0, 0, 1, 1000, false), 200 + 150 + 10'000);
  // a store issued while that load's data is still on its way crosses first
  LocalMemory s(c);
  const TimePs load = s.access(0, 0, 1, 1000, false);
  EXPECT_EQ(s.access(0, 0, 2, 10, true), 100 + 150);  // its 100 ps on the port, then into L2
  EXPECT_EQ(load, 350 + 10'000);
}

TEST(LocalMemory, StoresCrossAtTheirOwnRateOnThePortTheLoadsUse) {
  HopperConfig c = fast_memory();
  c.sm_load_bytes_per_ps = 0.4;  // an H100 SM: 116 B per clock loaded, 32 stored
  c.sm_store_bytes_per_ps = 0.1;
  LocalMemory m(c);
  // 1000 B stored: 10 000 ps on the port at the store rate, then into L2
  EXPECT_EQ(m.access(0, 0, 1, 1000, true), 10'000 + 150);
  // a load issued with it: its data is back at 350 but waits for the store to leave the port,
  // then takes 2500 ps at the load rate
  EXPECT_EQ(m.access(0, 0, 2, 1000, false), 10'000 + 2'500);
  // A steady copy (load, then store the same bytes) moves 1 / (1 / 0.4 + 1 / 0.1) = 0.08 B/ps:
  // slower than either direction alone, as measured
  LocalMemory cp(c);
  TimePs t = 0, stored = 0;
  for (int i = 0; i < 100; ++i) {
    const TimePs loaded = cp.access(t, 0, 100 + i, 1000, false);
    stored = cp.access(loaded, 0, 1000 + i, 1000, true);
    t = loaded;
  }
  EXPECT_NEAR(100'000.0 / static_cast<double>(stored), 0.08, 0.08 * 0.05);
  // the port's rates follow the SM clock
  LocalMemory slow(c);
  slow.set_sm_port_clock(0.5);
  EXPECT_EQ(slow.access(0, 0, 1, 1000, true), 20'000 + 150);
}

}  // namespace
}  // namespace cais::gpu
