// admit::redis::semaphore's operations sharing script calls, against a real redis-server: 32 threads of one process
// acquire and release on one semaphore object of capacity 4. Every acquisition is granted and every release answered
// "released"; never more than 4 permits are held at once (every holder is in this process: counted here); Redis ends
// with no holder and no waiter and all 4 permits free; and the operations took fewer script calls than there were
// operations (they shared calls: a `batch` call runs several, each as its own call would).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <initializer_list>
#include <iostream>
#include <iterator>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "admit/redis/client/connection.hpp"
#include "admit/redis/semaphore.hpp"
#include "io_thread.hpp"
#include "redis_server.hpp"
#include "semaphore_script.hpp"

namespace {

using namespace std::chrono_literals;
using admit::redis::connection;
using admit::redis::lease;
using admit::redis::reply;
using admit::redis::semaphore;
using admit::redis::testing::eval_args;
using admit::redis::testing::io_thread;
using admit::redis::testing::redis_server;
using admit::redis::testing::semaphore_source;

// `r` with what depends on the clock masked: integers of 10^12 or more (times in µs, fencing tokens, which are at
// least the server's time) become "T"; those above 50 s and up to 60 s in µs — the time until a lease of these
// tests' 60 s expires, after which a waiter at the head of the queue asks again — "E"; a grant handed back
// ("id:n:token:expiry:now") keeps its id and n.
std::string shape(const reply& r) {
  if (r.is_integer() && r.integer() > 50'000'000 && r.integer() <= 60'000'000) return "E";
  if (r.is_integer()) return r.integer() >= 1'000'000'000'000 ? "T" : std::to_string(r.integer());
  if (r.is_array()) {
    std::string s = "[";
    for (const auto& e : r.elements()) s += shape(e) + " ";
    return s + "]";
  }
  if (r.is_string()) {
    const auto second = r.str().find(':', r.str().find(':') + 1);
    return r.str().substr(0, second);
  }
  return r.is_error() ? "-" + r.str() : r.str();
}

TEST(RedisSemaphoreBatching, ManyThreadsShareScriptCallsAndNeverHoldMoreThanTheCapacity) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  constexpr std::int64_t capacity = 4;
  constexpr int threads = 32;
  constexpr int cycles = 60;
  semaphore s(conn, "shared", capacity);
  ASSERT_EQ(server.admin({"CONFIG", "RESETSTAT"}), "OK");

  std::atomic<std::int64_t> held{0};
  std::atomic<std::int64_t> most_held{0};
  std::atomic<int> failures{0};
  {
    std::vector<std::jthread> workers;
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&] {
        for (int i = 0; i < cycles; ++i) {
          auto r = s.try_acquire_for(30s);
          if (!r) {
            ++failures;
            ADD_FAILURE() << r.error().message();
            return;
          }
          const std::int64_t now_held = held.fetch_add(1) + 1;
          for (auto m = most_held.load(); now_held > m && !most_held.compare_exchange_weak(m, now_held);) {
          }
          std::this_thread::yield();  // holding: others queue meanwhile
          held.fetch_sub(1);
          const auto [status, error] = r->release();
          if (status != lease::release_status::released) {
            ++failures;
            ADD_FAILURE() << "release: " << error.message();
          }
        }
      });
    }
  }
  ASSERT_EQ(failures.load(), 0);
  EXPECT_LE(most_held.load(), capacity);
  EXPECT_GE(most_held.load(), 1);

  const auto [snapshot, error] = s.inspect();
  ASSERT_FALSE(error) << error.message();
  EXPECT_TRUE(snapshot.holders.empty());
  EXPECT_TRUE(snapshot.queue.empty());
  EXPECT_EQ(snapshot.available, capacity);

  // Each cycle is at least two operations (an acquire, a release); the script calls were fewer.
  const long long operations = 2LL * threads * cycles;
  const long long script_calls = server.script_calls();
  std::cout << "[ calls    ] " << script_calls << " script calls for at least " << operations << " operations\n";
  EXPECT_LT(script_calls, operations);
}

// The script's `batch` operation, called directly: the same operations give the same replies, in one call, as they do
// one call each (on another semaphore of the same capacity): a grant, a request queued behind it, the release that
// hands the permit to that request (returned to the caller, whose wake list it named), the poll that finds the
// request granted, an unknown operation's error in its place, and the release of the last lease; then, with nobody
// waiting, the calls that take the script's short way when alone (a free permit taken, a lease given back, one not
// held) and a request refused for want of a permit; then acquires with a deadline and with a class (the forms admit
// sends), a cancel, a renewal (sent whole) and a release; a grant cancelled, and a lease released then cancelled. The
// batch names what the operations send alike once, and its operations leave it out; one whose arguments cannot be
// read is an error in its place, and the others still run. Both semaphores end in the same state.
TEST(RedisSemaphoreBatching, ABatchRunsItsOperationsAsSeparateCallsWould) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  const std::string source = semaphore_source();
  ASSERT_FALSE(source.empty());
  const std::string wake = "{one}:wake:mine";
  const std::vector<std::vector<std::string>> ops = {
      {"acquire", "a", "1", "60000000", "1", "-1", "60000000", wake},
      {"acquire", "b", "1", "60000000", "1", "-1", "60000000", wake},
      {"release", "a", wake, "1"},
      {"poll", "b", "60000000"},
      {"no_such_operation"},
      {"release", "b", wake},
      {"acquire", "c", "1", "60000000", "0", "-1", "60000000", wake},
      {"acquire", "d", "1", "60000000", "0", "-1", "60000000", wake},
      {"release", "c", wake, "1"},
      {"release", "c", wake, "1"},
      {"acquire", "e", "1", "60000000", "1", "-1", "60000000", wake, "5000000"},
      {"acquire", "f", "1", "60000000", "1", "-1", "60000000", wake, "5000000", "1"},
      {"cancel", "f", wake},
      {"renew", "e", "60000000"},
      {"release", "e", wake, "1"},
      {"acquire", "g", "1", "60000000", "1", "-1", "60000000", wake},
      {"cancel", "g", wake},
      {"acquire", "h", "1", "60000000", "1", "-1", "60000000", wake},
      {"release", "h", wake, "1"},
      {"cancel", "h", wake},
  };
  // In the batch only, after the unknown operation: a release with one argument too many.
  constexpr std::size_t unreadable_at = 5;

  std::vector<std::string> separate;
  for (const auto& op : ops) {
    std::vector<std::string> argv{op.front(), "1"};
    argv.insert(argv.end(), op.begin() + 1, op.end());
    const auto r = conn.execute_command(std::nullopt, admit::redis::command(eval_args(source, "one", argv)));
    ASSERT_FALSE(r.error) << r.error.message();
    separate.push_back(shape(r.value));
  }

  // The batch names once what every operation above sends alike — the wake key, the lease TTL, max waiters, the
  // waiter TTL — and its acquires (without a deadline here), releases and polls leave them out.
  std::vector<std::string> argv{"batch", "1", std::to_string(ops.size() + 1), wake, "60000000", "-1", "60000000"};
  for (std::size_t i = 0; i < ops.size(); ++i) {
    if (i == unreadable_at) {
      for (const char* a : {"4", "release", "x", "1", "2"}) argv.emplace_back(a);
    }
    const auto& op = ops[i];
    std::vector<std::string> sent = op;
    if (op.front() == "acquire") {
      sent = {op[0], op[1], op[2], op[4]};  // name, id, n, whether it waits, then its deadline and class if any
      sent.insert(sent.end(), op.begin() + std::min<std::ptrdiff_t>(8, std::ssize(op)), op.end());
    } else if (op.front() == "release") {
      sent = {op[0], op[1]};  // name, id, and n when the release gave it
      if (op.size() > 3) sent.push_back(op[3]);
    } else if (op.front() == "poll" || op.front() == "cancel") {
      sent = {op[0], op[1]};
    }
    argv.push_back(std::to_string(sent.size()));
    argv.insert(argv.end(), sent.begin(), sent.end());
  }
  const auto r = conn.execute_command(std::nullopt, admit::redis::command(eval_args(source, "two", argv)));
  ASSERT_FALSE(r.error) << r.error.message();
  ASSERT_TRUE(r.value.is_array()) << r.value;
  // One array: each operation's reply as its length followed by its elements, an error as -1 followed by it.
  std::vector<std::string> batched;
  const auto& flat = r.value.elements();
  for (std::size_t at = 0; at < flat.size();) {
    ASSERT_TRUE(flat[at].is_integer()) << r.value;
    const std::int64_t length = flat[at].integer();
    if (length == -1) {
      ASSERT_LT(at + 1, flat.size()) << r.value;
      batched.push_back(shape(flat[at + 1]));
      at += 2;
      continue;
    }
    ASSERT_GE(length, 0) << r.value;
    ASSERT_LE(at + 1 + static_cast<std::size_t>(length), flat.size()) << r.value;
    const auto first = flat.begin() + static_cast<std::ptrdiff_t>(at + 1);
    std::vector<admit::redis::reply> elements(first, first + length);
    batched.push_back(shape(admit::redis::reply::array(std::move(elements))));
    at += 1 + static_cast<std::size_t>(length);
  }
  ASSERT_EQ(batched.size(), ops.size() + 1) << r.value;
  EXPECT_EQ(batched[unreadable_at], "-ERR admit semaphore: batch operation release with 4 arguments");
  batched.erase(batched.begin() + unreadable_at);
  for (std::size_t i = 0; i < ops.size(); ++i) {
    EXPECT_EQ(batched[i], separate[i]) << "operation " << i << " (" << ops[i].front() << ")";
  }
  EXPECT_EQ(separate[0], "[0 1 T T T 0 ]");  // granted, none left free
  EXPECT_EQ(separate[1], "[1 1 T E ]");      // queued, first: at the head, it asks again when a's lease expires
  EXPECT_EQ(separate[2], "[0 1 T b:1 ]");    // released, handed to b
  EXPECT_EQ(separate[3], "[0 1 T T T ]");    // b holds it
  EXPECT_EQ(separate[5], "[0 1 T ]");        // released
  EXPECT_EQ(separate[4].rfind("-ERR admit semaphore: unknown operation no_such_operation", 0), 0u) << separate[4];
  EXPECT_EQ(separate[6], "[0 1 T T T 0 ]");   // c takes the free permit
  EXPECT_EQ(separate[7], "[2 0 T ]");         // none left for d, which does not wait
  EXPECT_EQ(separate[8], "[0 1 T ]");         // released
  EXPECT_EQ(separate[9], "[5 0 T ]");         // not held any more
  EXPECT_EQ(separate[10], "[0 1 T T T 0 ]");  // e takes the free permit
  EXPECT_EQ(separate[11], "[1 2 T E ]");      // f queues, second to arrive, at the head: asks at e's expiry
  EXPECT_EQ(separate[12], "[6 0 T ]");        // and leaves
  EXPECT_EQ(separate[13], "[0 T T ]");        // e's lease renewed
  EXPECT_EQ(separate[14], "[0 1 T ]");        // and released
  // A call writes its grants and the records of the leases it ended when it ends (flush_writes in core.lua): what
  // reads them in the same call must see them. A grant given back by its cancel in the same call, and a cancel after
  // the lease's release, which must find nothing to give back (the record of the lease read before its removal was
  // written freed its permit twice).
  EXPECT_EQ(separate[15], "[0 1 T T T 0 ]");  // g takes the free permit
  EXPECT_EQ(separate[16], "[6 1 T ]");        // and gives it back
  EXPECT_EQ(separate[17], "[0 1 T T T 0 ]");  // h takes it
  EXPECT_EQ(separate[18], "[0 1 T ]");        // releases it
  EXPECT_EQ(separate[19], "[5 0 T ]");        // and its cancel finds nothing

  // The same state: the counters (times masked), no holder, lease or waiter left.
  for (const char* name : {"one", "two"}) {
    const std::string tag = std::string("{") + name + "}:";
    const auto meta = conn.execute_command(std::nullopt, admit::redis::command{"HGETALL", tag + "meta"});
    ASSERT_FALSE(meta.error);
    ASSERT_TRUE(meta.value.is_array());
    // By field name: a hash's fields come in no set order (meta is a hash table, not a packed array: see
    // unpack_key in core.lua). A time or a fencing token (13 digits or more) becomes "T".
    std::map<std::string, std::string> by_name;
    const auto& e = meta.value.elements();
    for (std::size_t i = 0; i + 1 < e.size(); i += 2) {
      const std::string& v = e[i + 1].str();
      const bool time = v.size() >= 13 && v.find_first_not_of("0123456789") == std::string::npos;
      by_name[e[i].str()] = time ? std::string("T") : v;
    }
    std::string fields;
    for (const auto& [field, value] : by_name) fields += field + " " + value + " ";
    EXPECT_EQ(fields, "capacity 1 definition 1/0/0 fence T free 1 next T seq 2 ") << name;
    for (const char* key : {"holders", "leases", "expiry"}) {
      const auto exists = conn.execute_command(std::nullopt, admit::redis::command{"EXISTS", tag + key});
      EXPECT_EQ(shape(exists.value), "0") << name << ": " << key;
    }
    // The queue holds at most the record of f, which left: a record stays until it reaches the head, and e's last
    // release, alone, takes the short way that does not serve the queue (nobody waits), where in the batch it does.
    const auto queue = conn.execute_command(std::nullopt, admit::redis::command{"LRANGE", tag + "waiting", "0", "-1"});
    ASSERT_TRUE(queue.value.is_array()) << queue.value;
    for (const auto& record : queue.value.elements()) EXPECT_EQ(record.str().rfind("f:", 0), 0u) << name;
  }
}

// A waiter that asks again — in an earlier call, or earlier in the same call — keeps its place and its first request,
// its expiry moved: one record each in the queue, granted in arrival order. A batch whose max waiters is reached
// halfway refuses the rest (the count includes the waiters it queued itself).
TEST(RedisSemaphoreBatching, AWaiterThatAsksAgainKeepsItsPlaceAndTheQueueCountsTheCallsOwnWaiters) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  const std::string source = semaphore_source();
  ASSERT_FALSE(source.empty());
  const auto call = [&](const std::string& name, std::vector<std::string> argv) {
    const auto r = conn.execute_command(std::nullopt, admit::redis::command(eval_args(source, name, argv)));
    EXPECT_FALSE(r.error) << r.error.message();
    return r.value;
  };
  const auto command = [&](std::vector<std::string> args) {
    const auto r = conn.execute_command(std::nullopt, admit::redis::command(std::move(args)));
    EXPECT_FALSE(r.error) << r.error.message();
    return shape(r.value);
  };
  const std::string wake = "{four}:wake:mine";
  const auto acquire = [&](const char* id) {
    return shape(call("four", {"acquire", "1", id, "1", "60000000", "1", "-1", "60000000", wake}));
  };
  const auto release = [&](const char* id) { return shape(call("four", {"release", "1", id, wake, "1"})); };
  EXPECT_EQ(acquire("h"), "[0 1 T T T 0 ]");
  EXPECT_EQ(acquire("w1"), "[1 1 T E ]");  // the head: asks again when h's lease expires
  EXPECT_EQ(acquire("w2"), "[1 2 T 0 ]");  // behind it: at its poll interval
  const auto expiry_of = [&](const char* id) {
    const auto r = conn.execute_command(std::nullopt, admit::redis::command{"ZSCORE", "{four}:expiry", id});
    return r.value.is_string() ? std::stoll(r.value.str()) : 0;
  };
  const long long w1_expires = expiry_of("w1");
  ASSERT_GT(w1_expires, 0);

  // One batch of waiting acquires (sent as a batch sends them: name, id, n, whether it waits), with max waiters `most`
  // and waiter TTL `waiter_ttl`.
  const auto acquires = [&](const std::string& name, const char* most, const char* waiter_ttl,
                            std::initializer_list<const char*> ids) {
    std::vector<std::string> argv{"batch", "1", std::to_string(ids.size()), wake, "60000000", most, waiter_ttl};
    for (const char* id : ids) argv.insert(argv.end(), {"4", "acquire", id, "1", "1"});
    return shape(call(name, argv));
  };
  // w1 again (waiting since an earlier call), w3, and w3 again: three operations in one call, with a longer waiter TTL.
  EXPECT_EQ(acquires("four", "-1", "90000000", {"w1", "w3", "w3"}), "[4 1 3 T 0 4 1 4 T 0 4 1 5 T 0 ]");
  EXPECT_GT(expiry_of("w1"), w1_expires);               // moved by its second request
  EXPECT_EQ(command({"LLEN", "{four}:waiting"}), "3");  // w1, w2, w3: one record each
  EXPECT_EQ(command({"ZCARD", "{four}:expiry"}), "3");

  EXPECT_EQ(release("h"), "[0 1 T w1:1 ]");
  EXPECT_EQ(release("w1"), "[0 1 T w2:1 ]");
  EXPECT_EQ(release("w2"), "[0 1 T w3:1 ]");
  EXPECT_EQ(release("w3"), "[0 1 T ]");
  EXPECT_EQ(command({"HGET", "{four}:meta", "free"}), "1");
  EXPECT_EQ(command({"EXISTS", "{four}:expiry"}), "0");
  EXPECT_EQ(command({"LLEN", "{four}:waiting"}), "0");

  // At most 2 waiting: of three requests in one call, the third is refused (FULL, none free).
  EXPECT_EQ(shape(call("five", {"acquire", "1", "h", "1", "60000000", "1", "-1", "60000000", wake})), "[0 1 T T T 0 ]");
  EXPECT_EQ(acquires("five", "2", "60000000", {"q1", "q2", "q3"}), "[4 1 1 T E 4 1 2 T 0 3 3 0 T ]");
  EXPECT_EQ(command({"ZCARD", "{five}:expiry"}), "2");
  EXPECT_EQ(command({"LLEN", "{five}:waiting"}), "2");
}

// A poll that finds its lease's record damaged (a key changed from outside) answers with an error in its own place
// in the batch; the operation after it is still answered, and whole. (Its reply once had holes, and Redis ends an array
// at its first nil: the batch's reply lost the operations after it.)
TEST(RedisSemaphoreBatching, ALeaseThatCannotBeReadIsAnErrorInItsPlace) {
  redis_server server;
  io_thread io;
  connection conn(io.executor(), server.url());
  const std::string source = semaphore_source();
  ASSERT_FALSE(source.empty());
  const std::string wake = "{three}:wake:mine";
  const auto call = [&](std::vector<std::string> argv) {
    const auto r = conn.execute_command(std::nullopt, admit::redis::command(eval_args(source, "three", argv)));
    EXPECT_FALSE(r.error) << r.error.message();
    return r.value;
  };
  EXPECT_EQ(shape(call({"acquire", "1", "a", "1", "60000000", "1", "-1", "60000000", wake})), "[0 1 T T T 0 ]");
  EXPECT_EQ(shape(call({"acquire", "1", "b", "1", "60000000", "1", "-1", "60000000", wake})), "[1 1 T E ]");
  ASSERT_FALSE(conn.execute_command(std::nullopt, admit::redis::command{"HSET", "{three}:leases", "b", "x"}).error);

  const reply r =
      call({"batch", "1", "2", wake, "60000000", "-1", "60000000", "2", "poll", "b", "3", "release", "a", "1"});
  ASSERT_TRUE(r.is_array()) << r;
  ASSERT_EQ(r.elements().size(), 7u) << r;  // -1, the poll's error; 4, the release's four elements
  EXPECT_EQ(shape(r.elements()[0]), "-1");
  EXPECT_EQ(shape(r.elements()[1]), "-ERR admit semaphore: lease b cannot be read (x)");
  EXPECT_EQ(shape(r.elements()[2]), "4");
  EXPECT_EQ(shape(admit::redis::reply::array({r.elements().begin() + 3, r.elements().end()})), "[0 1 T b:1 ]");
}

}  // namespace
