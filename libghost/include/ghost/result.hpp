// SPDX-License-Identifier: LGPL-2.1-or-later
// Errors at libghost's boundaries: a std::error_code plus the reason a person
// should read (for instance why the module refused an export).
#pragma once

#include <string>
#include <system_error>
#include <utility>
#include <variant>

namespace ghost {

struct Error {
    std::error_code code;
    std::string message; // complete sentence for the user; may be empty

    static Error from_errno(int err, std::string message) {
        return {std::error_code(err, std::system_category()), std::move(message)};
    }
    // The message, or the code's own text when there is none.
    std::string what() const { return message.empty() ? code.message() : message; }
};

// An expected-like value-or-error (std::expected is C++23).
template <class T> class [[nodiscard]] Result {
  public:
    Result(T value) : v_(std::move(value)) {}
    Result(Error error) : v_(std::move(error)) {}

    bool has_value() const { return v_.index() == 0; }
    explicit operator bool() const { return has_value(); }

    T& value() & { return std::get<0>(v_); }
    const T& value() const& { return std::get<0>(v_); }
    T&& value() && { return std::get<0>(std::move(v_)); }
    T& operator*() & { return value(); }
    const T& operator*() const& { return value(); }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }

    const Error& error() const { return std::get<1>(v_); }

  private:
    std::variant<T, Error> v_;
};

template <> class [[nodiscard]] Result<void> {
  public:
    Result() = default;
    Result(Error error) : err_(std::move(error)), ok_(false) {}

    bool has_value() const { return ok_; }
    explicit operator bool() const { return ok_; }
    const Error& error() const { return err_; }

  private:
    Error err_;
    bool ok_ = true;
};

} // namespace ghost
