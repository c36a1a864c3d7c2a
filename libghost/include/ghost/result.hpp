// SPDX-License-Identifier: LGPL-2.1-or-later
// Errors at libghost's boundaries: a std::error_code plus the reason a person
// should read (for instance why the module refused an export).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <system_error>
#include <type_traits>
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

template <class T> class Result;

namespace detail {

// value() (or *, ->) of a Result that holds an error: a contract violation.
// It never throws; it says which error was ignored, then aborts.
[[noreturn]] inline void bad_result_access(const Error& e) {
    std::fprintf(stderr, "ghost: value() of a Result that holds an error: %s\n", e.what().c_str());
    std::abort();
}

// error() of a Result that holds a value: a contract violation as well.
[[noreturn]] inline void bad_error_access() {
    std::fprintf(stderr, "ghost: error() of a Result that holds a value\n");
    std::abort();
}

template <class R> struct is_result : std::false_type {};
template <class U> struct is_result<Result<U>> : std::true_type {};

// Result<U> of f(args...), which returns U (void for Result<void>).
template <class F, class... A> auto wrap_call(F&& f, A&&... a) {
    using U = std::remove_cvref_t<std::invoke_result_t<F, A...>>;
    if constexpr (std::is_void_v<U>) {
        std::forward<F>(f)(std::forward<A>(a)...);
        return Result<U>(); // U (void) keeps it dependent: Result<void> is defined below
    } else {
        return Result<U>(std::forward<F>(f)(std::forward<A>(a)...));
    }
}

} // namespace detail

// An expected-like value-or-error (std::expected is C++23). value(), * and
// -> on an error, and error() on a value, are contract violations: they
// print the error's message and abort (they never throw). Test has_value()
// (or the bool conversion) first, or use value_or().
//
//   and_then(f):  f(value) -> Result<U>; an error passes through.
//   transform(f): f(value) -> U (or void); an error passes through.
//   or_else(f):   f(error) -> Result<T>; a value passes through.
template <class T> class [[nodiscard]] Result {
  public:
    using value_type = T;

    Result(T value) : v_(std::move(value)) {}
    Result(Error error) : v_(std::move(error)) {}

    bool has_value() const { return v_.index() == 0; }
    explicit operator bool() const { return has_value(); }

    T& value() & {
        check();
        return *std::get_if<0>(&v_);
    }
    const T& value() const& {
        check();
        return *std::get_if<0>(&v_);
    }
    T&& value() && {
        check();
        return std::move(*std::get_if<0>(&v_));
    }
    T& operator*() & { return value(); }
    const T& operator*() const& { return value(); }
    T&& operator*() && { return std::move(*this).value(); }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }

    const Error& error() const {
        if (has_value())
            detail::bad_error_access();
        return *std::get_if<1>(&v_);
    }

    // The value, or fallback when this holds an error.
    template <class U> T value_or(U&& fallback) const& {
        return has_value() ? *std::get_if<0>(&v_) : static_cast<T>(std::forward<U>(fallback));
    }
    template <class U> T value_or(U&& fallback) && {
        return has_value() ? std::move(*std::get_if<0>(&v_))
                           : static_cast<T>(std::forward<U>(fallback));
    }

    template <class F> auto and_then(F&& f) const& {
        using R = std::remove_cvref_t<std::invoke_result_t<F, const T&>>;
        static_assert(detail::is_result<R>::value, "and_then: f must return a Result");
        if (!has_value())
            return R(error());
        return std::forward<F>(f)(*std::get_if<0>(&v_));
    }
    template <class F> auto and_then(F&& f) && {
        using R = std::remove_cvref_t<std::invoke_result_t<F, T&&>>;
        static_assert(detail::is_result<R>::value, "and_then: f must return a Result");
        if (!has_value())
            return R(std::move(*std::get_if<1>(&v_)));
        return std::forward<F>(f)(std::move(*std::get_if<0>(&v_)));
    }

    template <class F> auto transform(F&& f) const& {
        using R = decltype(detail::wrap_call(std::forward<F>(f), std::declval<const T&>()));
        if (!has_value())
            return R(error());
        return detail::wrap_call(std::forward<F>(f), *std::get_if<0>(&v_));
    }
    template <class F> auto transform(F&& f) && {
        using R = decltype(detail::wrap_call(std::forward<F>(f), std::declval<T&&>()));
        if (!has_value())
            return R(std::move(*std::get_if<1>(&v_)));
        return detail::wrap_call(std::forward<F>(f), std::move(*std::get_if<0>(&v_)));
    }

    template <class F> Result or_else(F&& f) const& {
        if (has_value())
            return *this;
        return std::forward<F>(f)(*std::get_if<1>(&v_));
    }
    template <class F> Result or_else(F&& f) && {
        if (has_value())
            return std::move(*this);
        return std::forward<F>(f)(std::move(*std::get_if<1>(&v_)));
    }

  private:
    void check() const {
        if (!has_value())
            detail::bad_result_access(*std::get_if<1>(&v_));
    }

    std::variant<T, Error> v_;
};

template <> class [[nodiscard]] Result<void> {
  public:
    using value_type = void;

    Result() = default;
    Result(Error error) : err_(std::move(error)), ok_(false) {}

    bool has_value() const { return ok_; }
    explicit operator bool() const { return ok_; }
    // Nothing to return: aborts (as Result<T>::value()) on an error.
    void value() const {
        if (!ok_)
            detail::bad_result_access(err_);
    }
    // An empty Error (no code, no message) when this holds no error.
    const Error& error() const { return err_; }

    template <class F> auto and_then(F&& f) const {
        using R = std::remove_cvref_t<std::invoke_result_t<F>>;
        static_assert(detail::is_result<R>::value, "and_then: f must return a Result");
        if (!ok_)
            return R(err_);
        return std::forward<F>(f)();
    }
    template <class F> auto transform(F&& f) const {
        using R = decltype(detail::wrap_call(std::forward<F>(f)));
        if (!ok_)
            return R(err_);
        return detail::wrap_call(std::forward<F>(f));
    }
    template <class F> Result or_else(F&& f) const {
        if (ok_)
            return *this;
        return std::forward<F>(f)(err_);
    }

  private:
    Error err_;
    bool ok_ = true;
};

} // namespace ghost
