// `admit serve`'s Redis backend (see redis_backend.hpp): the concurrency rules, on admit::redis::semaphore. A hit is
// one non-waiting acquire of its n permits; the lease is detached and handed to the caller by id, and any process of
// the fleet releases it by that id — or Redis lets it expire lease_ttl after its grant.
#include <algorithm>
#include <boost/asio/post.hpp>
#include <charconv>
#include <exception>

#include "serve/engine/redis_backend.hpp"
#include "serve/engine/redis_backend_state.hpp"

namespace admit::serve {

using detail::pending_request;
using detail::steady;

namespace detail {

std::string escape_braces(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    if (c == '%') {
      out += "%25";
    } else if (c == '{') {
      out += "%7B";
    } else if (c == '}') {
      out += "%7D";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

}  // namespace detail

namespace {

// What the breaker hears of a semaphore's answer: Redis answered (a refusal, or no such semaphore) is a success.
std::error_code as_call_outcome(std::error_code ec) {
  return ec == errc::would_block || ec == errc::exceeds_capacity || ec == errc::not_found ? std::error_code() : ec;
}

// The parts of a lease id "cc2.<limit>.<hex of the counter key>.<lease id>"; std::nullopt for any other text.
struct lease_parts {
  std::uint32_t limit = 0;
  std::string counter_key;
  std::string id;
};
std::optional<lease_parts> parse_lease(std::string_view lease) {
  if (!lease.starts_with(detail::lease_format)) return std::nullopt;
  std::string_view rest = lease.substr(detail::lease_format.size());
  const auto dot1 = rest.find('.');
  if (dot1 == std::string_view::npos) return std::nullopt;
  const auto dot2 = rest.find('.', dot1 + 1);
  if (dot2 == std::string_view::npos) return std::nullopt;
  lease_parts p;
  const std::string_view limit = rest.substr(0, dot1);
  const auto [end, ec] = std::from_chars(limit.data(), limit.data() + limit.size(), p.limit);
  if (ec != std::errc() || end != limit.data() + limit.size()) return std::nullopt;
  auto key = detail::unhex(rest.substr(dot1 + 1, dot2 - dot1 - 1));
  if (!key) return std::nullopt;
  p.counter_key = std::move(*key);
  p.id = std::string(rest.substr(dot2 + 1));
  return p;
}

}  // namespace

std::shared_ptr<redis::semaphore> redis_backend::state::semaphore_for(const std::string& counter_key,
                                                                      std::uint32_t limit, bool cached) {
  std::string name = opts.key_prefix + "cc:" + std::to_string(limit) + ":" + detail::escape_braces(counter_key);
  const auto make = [&] {
    redis::semaphore_options so;
    so.lease_ttl = opts.lease_ttl;
    so.auto_renew = false;  // every lease is detached as soon as it is granted
    so.timeout = opts.timeout;
    so.idle_ttl = std::chrono::seconds(1);
    so.breaker.failure_threshold = 0;  // the backend's own breaker guards these calls, as its scripts'
    return clustered.load(std::memory_order_acquire) ? std::make_shared<redis::semaphore>(*nodes, name, limit, so)
                                                     : std::make_shared<redis::semaphore>(*conn, name, limit, so);
  };
  std::unordered_map<std::string, std::shared_ptr<redis::semaphore>> dropped;  // destroyed after the lock
  {
    const admit::detail::lock_guard lock(semaphores_mutex);
    if (auto it = semaphores.find(name); it != semaphores.end()) return it->second;
    if (cached) {
      if (semaphores.size() >= opts.max_limiters) dropped.swap(semaphores);
      std::shared_ptr<redis::semaphore> made = make();
      semaphores.emplace(std::move(name), made);
      return made;
    }
  }
  return make();  // not to be cached: made without the lock
}

void redis_backend::state::acquire(const std::shared_ptr<pending_request>& req, std::size_t i, const hit& h) {
  const std::uint32_t limit = h.rule->concurrency;
  std::shared_ptr<redis::semaphore> sem;
  try {
    sem = semaphore_for(h.counter_key, limit);
  } catch (const std::exception& e) {
    return req->fail(i, h.rule->full_key + ": " + e.what());
  }
  const redis::breaker_pass pass = breaker.allow(steady::now());
  if (pass == redis::breaker_pass::refused) {
    boost::asio::post(ex, [self = shared_from_this(), req, i] {
      req->fail(i, self->failure_text(make_error_code(errc::circuit_open)));
    });
    return;
  }
  if (h.n == 0) {  // a check: takes nothing, and answers with the permits in use now
    sem->async_inspect(1, [self = shared_from_this(), req, i, limit, pass, sem](std::error_code ec,
                                                                                const redis::semaphore_snapshot& s) {
      self->breaker.report(as_call_outcome(ec), pass, steady::now());
      if (ec && ec != errc::not_found) return req->fail(i, self->failure_text(ec));
      // No semaphore in Redis (never used, or idle long enough to be forgotten): nothing is held.
      const std::int64_t held = ec ? 0 : std::max<std::int64_t>(0, s.capacity - s.available);
      hit_outcome o;
      o.limit = limit;
      o.count_after = static_cast<std::uint64_t>(held);
      o.result = held <= limit ? hit_outcome::state::ok : hit_outcome::state::over_limit;
      o.remaining = static_cast<std::uint32_t>(std::clamp<std::int64_t>(limit - held, 0, limit));
      if (held > 0) o.reset_after = self->opts.lease_ttl;  // the longest the permits in use can stay held
      req->finish(i, std::move(o));
    });
    return;
  }
  sem->async_try_acquire(h.n, [self = shared_from_this(), req, i, limit, pass, n = h.n, key = h.counter_key, sem](
                                  std::error_code ec, redis::lease l) {
    self->breaker.report(as_call_outcome(ec), pass, steady::now());
    hit_outcome o;
    o.limit = limit;
    if (ec == errc::would_block || ec == errc::exceeds_capacity) {
      // Refused: its n would take the permits in use above the limit. The count after it is not known exactly (the
      // refusal does not say how many are in use); limit + n puts every one of its hits over the limit.
      o.result = hit_outcome::state::over_limit;
      o.count_after = std::uint64_t{limit} + n;
      o.reset_after = self->opts.lease_ttl;  // the longest the permits in use can stay held
      return req->finish(i, std::move(o));
    }
    if (ec) return req->fail(i, self->failure_text(ec));
    const std::int64_t free = std::clamp<std::int64_t>(l.available().value_or(0), 0, limit);
    o.result = hit_outcome::state::ok;
    o.remaining = static_cast<std::uint32_t>(free);
    o.count_after = static_cast<std::uint64_t>(limit - free);
    o.reset_after = self->opts.lease_ttl;
    o.lease = std::string(detail::lease_format) + std::to_string(limit) + "." + detail::hex(key) + "." + l.detach();
    req->finish(i, std::move(o));
  });
}

void redis_backend::state::release(const std::string& lease, std::function<void(release_result)> done) {
  using enum release_result::state;
  auto parts = parse_lease(lease);
  if (!parts) return done({not_held, {}});
  with_client(deadline(), [self = shared_from_this(), p = std::move(*parts), done = std::move(done)](
                              redis::client* c, const std::string& error) mutable {
    if (c == nullptr) return done({failed, error});
    std::shared_ptr<redis::semaphore> sem;
    try {
      // Not cached: the lease's text comes from the caller, and made-up ones must not churn the decisions' objects.
      sem = self->semaphore_for(p.counter_key, p.limit, false);
    } catch (const std::exception&) {
      return done({not_held, {}});  // not a name any lease of this backend can have
    }
    sem->async_release(p.id,
                       [self, done = std::move(done), sem](std::error_code ec, redis::lease::release_status status) {
                         // An error says nothing of the lease: the release may not have reached Redis, or its answer
                         // may not have come.
                         if (ec) return done({failed, self->failure_text(ec)});
                         done({status == redis::lease::release_status::released ? released : not_held, {}});
                       });
  });
}

void redis_backend::release(std::string lease, std::function<void(release_result)> done) {
  state_->release(lease, std::move(done));
}

}  // namespace admit::serve
