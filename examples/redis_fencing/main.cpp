// redis_fencing — why a lease on a distributed semaphore needs a fencing token (Martin Kleppmann, "How to do
// distributed locking"): a holder that stops for longer than its lease (a GC pause, SIGSTOP, a VM migration) wakes up
// believing it still holds the permit. The lease cannot stop it from writing; the storage can, by refusing any token
// smaller than one it has already seen.
//
//   redis_fencing [redis://127.0.0.1:6379]
//
// Worker A takes the only permit with a 300 ms lease and no renewal, then stalls for 600 ms. Worker B (another
// semaphore object, as in another process) waits in the queue, gets the permit when A's lease expires, and writes.
// A wakes up and writes with its old token: refused.
#include <chrono>
#include <cstdint>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include "admit/redis/client/connection.hpp"
#include "admit/redis/semaphore.hpp"

namespace {

// The protected resource: a store that accepts a write only with a token at least as large as the largest it has seen
// (a database does the same with a conditional update: UPDATE ... WHERE fence <= :token).
class fenced_storage {
 public:
  bool write(std::int64_t token, const std::string& value) {
    std::lock_guard lock(mutex_);
    if (token < highest_) return false;
    highest_ = token;
    value_ = value;
    return true;
  }
  std::string value() {
    std::lock_guard lock(mutex_);
    return value_;
  }

 private:
  std::mutex mutex_;
  std::int64_t highest_ = 0;
  std::string value_;
};

}  // namespace

int main(int argc, char** argv) {
  using namespace std::chrono_literals;
  const std::string url = argc > 1 ? argv[1] : "redis://127.0.0.1:6379";
  boost::asio::io_context io;
  auto work = boost::asio::make_work_guard(io);
  std::thread runner([&] { io.run(); });

  int status = 0;
  {
    admit::redis::connection conn(io.get_executor(), url);
    admit::redis::semaphore_options a_options;
    a_options.lease_ttl = 300ms;
    a_options.auto_renew = false;  // A stands for a process that stops: it renews nothing while stalled
    admit::redis::semaphore worker_a(conn, "fencing-example", 1, a_options);
    admit::redis::semaphore worker_b(conn, "fencing-example", 1);
    fenced_storage storage;

    auto a = worker_a.try_acquire();
    if (!a) {
      std::cerr << "redis_fencing: worker A could not acquire: " << a.error().message() << "\n";
      status = 1;
    } else {
      std::cout << "A holds the permit (lease 300 ms) and stalls for 600 ms\n";
      std::thread b_thread([&] {
        auto b = worker_b.try_acquire_for(5s);
        if (!b) {
          std::cout << "B: no permit: " << b.error().message() << "\n";
          return;
        }
        std::cout << "B holds the permit after A's lease expired; B's token is "
                  << (b->fencing_token() > a->fencing_token() ? "larger" : "NOT larger") << " than A's\n";
        std::cout << "B writes: " << (storage.write(b->fencing_token(), "B") ? "accepted" : "refused") << "\n";
      });
      std::this_thread::sleep_for(600ms);  // the stall
      b_thread.join();
      std::cout << "A wakes up and writes with its old token: "
                << (storage.write(a->fencing_token(), "A") ? "accepted" : "refused") << "\n";
      std::cout << "A renews: " << (a->renew().first ? "renewed" : "lease lost") << "\n";
      std::cout << "the storage holds the write of " << storage.value() << "\n";
    }
  }
  work.reset();
  runner.join();
  return status;
}
