// admit/asio/detail/converting_handler.hpp — a completion handler that turns the semaphore's completion
// (error_code, admit::permit) into another one (error_code, a limiter's own permit) before calling the user's handler,
// so that limiters built on a semaphore reuse its asynchronous acquisition (acquire_operation) unchanged.
//
// The wrapper forwards every associated characteristic (executor, allocator, cancellation slot, ...) to the wrapped
// handler, as Asio's own adapters (append, consign) do, so the operation waits, is cancelled and completes exactly as
// the user's handler asks. `Convert` is called once, as convert(handler, ec, permit), and is destroyed with the
// wrapper: a conversion holding a resource (a reference to a key's entry) releases it if the handler never runs
// (the execution context shut down).
#pragma once

#include <boost/asio/associator.hpp>
#include <boost/system/error_code.hpp>
#include <utility>

#include "admit/permit.hpp"

namespace admit::asio::detail {

template <class Handler, class Convert>
class converting_handler {
 public:
  converting_handler(Handler handler, Convert convert) : handler_(std::move(handler)), convert_(std::move(convert)) {}

  void operator()(boost::system::error_code ec, admit::permit p) {
    std::move(convert_)(std::move(handler_), ec, std::move(p));
  }

  Handler handler_;
  Convert convert_;
};

}  // namespace admit::asio::detail

namespace boost::asio {

template <template <class, class> class Associator, class Handler, class Convert, class DefaultCandidate>
struct associator<Associator, admit::asio::detail::converting_handler<Handler, Convert>, DefaultCandidate>
    : Associator<Handler, DefaultCandidate> {
  static typename Associator<Handler, DefaultCandidate>::type get(
      const admit::asio::detail::converting_handler<Handler, Convert>& h) noexcept {
    return Associator<Handler, DefaultCandidate>::get(h.handler_);
  }
  static auto get(const admit::asio::detail::converting_handler<Handler, Convert>& h,
                  const DefaultCandidate& c) noexcept
      -> decltype(Associator<Handler, DefaultCandidate>::get(h.handler_, c)) {
    return Associator<Handler, DefaultCandidate>::get(h.handler_, c);
  }
};

}  // namespace boost::asio
