// Spellings of the admin prefix the Worker tests share (not a test file).

/** Every spelling that enters the admin prefix and leaves it, or changes its case. */
export const LEAVING = [
  "/.tollgate/..%2fapi/echo",
  "/.tollgate/..;/api/echo",
  "/.tollgate/..%5capi/echo",
  "/.tollgate/..%252fapi/echo",
  "/.tollgate/ui/..%2f..%2fapi/echo",
  "/.tollgate/ui/..;/..;/api/echo",
  "/.tollgate/..%2F..%2Fapi/echo",
  "/.TOLLGATE/..%2fapi/echo",
  "/.Tollgate/ui/..%2f..%2fapi/echo",
];
