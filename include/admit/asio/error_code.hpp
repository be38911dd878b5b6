// admit/asio/error_code.hpp — admit's error codes at Asio's edge: completion handlers receive a
// boost::system::error_code, the rest of admit's API a std::error_code holding an admit::errc.
//
//   boost::system::error_code ec = admit::asio::to_error_code(admit::errc::timeout);   // ec == admit::errc::timeout
//   std::error_code back = admit::asio::from_error_code(boost::asio::error::operation_aborted);  // errc::cancelled
#pragma once

#include <boost/asio/error.hpp>
#include <boost/system/error_code.hpp>
#include <system_error>

#include "admit/errc.hpp"

namespace admit::asio {

// The error code a completion handler receives for `ec`: success for none, Asio's operation_aborted for
// admit::errc::cancelled (Asio's convention for a cancelled operation), otherwise `ec` itself — a converted
// std::error_code keeps its category, so it still compares equal to the admit::errc value.
inline boost::system::error_code to_error_code(const std::error_code& ec) noexcept {
  if (!ec) return {};
  if (ec == errc::cancelled) return boost::asio::error::operation_aborted;
  return boost::system::error_code(ec);
}
inline boost::system::error_code to_error_code(errc e) noexcept {
  if (e == errc{}) return {};
  return to_error_code(std::error_code(e));
}

// The reverse, for a public result that holds a std::error_code: admit::errc::cancelled for Asio's
// operation_aborted, otherwise `ec` as a std::error_code (an Asio or system error keeps its value and category;
// one that came from an admit::errc is that admit::errc again).
inline std::error_code from_error_code(const boost::system::error_code& ec) noexcept {
  if (ec == boost::asio::error::operation_aborted) return errc::cancelled;
  return ec;
}

}  // namespace admit::asio
