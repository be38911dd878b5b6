#include "reply_reader.hpp"

#include <hiredis/hiredis.h>

#include <cstddef>
#include <exception>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace admit::redis::detail {
namespace {

// A top-level reply is a heap object that hiredis holds until it is complete (or frees with free_object when the
// reader fails or goes first); an element is its parent's elements()[idx], made as the parent's array was sized, so
// its address stays valid while the reader fills in the rest. The functions are called from C: nothing may throw
// through them (nullptr: out of memory, which the reader reports).
void* place(const redisReadTask* task, reply&& value) noexcept {
  try {
    if (task->parent != nullptr) {
      reply& slot = static_cast<reply*>(task->parent->obj)->elements()[static_cast<std::size_t>(task->idx)];
      slot = std::move(value);
      return &slot;
    }
    return new reply(std::move(value));
  } catch (const std::exception&) {
    return nullptr;
  }
}

void* create_string(const redisReadTask* task, char* s, std::size_t len) {
  try {
    std::string text(s, len);
    switch (task->type) {
      case REDIS_REPLY_ERROR:
        return place(task, reply::error(std::move(text)));
      case REDIS_REPLY_STATUS:
        return place(task, reply::status(std::move(text)));
      default:
        return place(task, reply::string(std::move(text)));
    }
  } catch (const std::exception&) {
    return nullptr;
  }
}

void* create_array(const redisReadTask* task, int elements) {
  try {
    return place(task, reply::array(std::vector<reply>(static_cast<std::size_t>(elements))));
  } catch (const std::exception&) {
    return nullptr;
  }
}

void* create_integer(const redisReadTask* task, long long value) { return place(task, reply::integer(value)); }

void* create_nil(const redisReadTask* task) { return place(task, reply()); }

void free_object(void* obj) { delete static_cast<reply*>(obj); }

redisReplyObjectFunctions functions{create_string, create_array, create_integer, create_nil, free_object};

}  // namespace

redisReader* make_reply_reader() { return redisReaderCreateWithFunctions(&functions); }

reply take_reply(void* raw) {
  const std::unique_ptr<reply> owned(static_cast<reply*>(raw));
  return std::move(*owned);
}

}  // namespace admit::redis::detail
