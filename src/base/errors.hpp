// Building and throwing ArgumentError: the one place that formats "argument: expected vs given".
#pragma once

#include <sstream>
#include <string>

#include "maskattn/maskattn.hpp"

namespace maskattn::detail {

template <class... Parts>
std::string cat(const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  return os.str();
}

[[noreturn]] inline void fail(const std::string& argument, const std::string& message) {
  throw ArgumentError(argument, message);
}
// A wrong kind of value (JavaScript maps it to TypeError).
[[noreturn]] inline void fail_type(const std::string& argument, const std::string& message) {
  throw ArgumentError(argument, message, /*type_error=*/true);
}

}  // namespace maskattn::detail
