<?php
// A PHP 8 origin for tests/origins, the router script of `php -S`: the
// protected actions of tollgate's shipped config and examples, written as a
// plain PHP app reads requests ($_REQUEST, $_COOKIE, $_SERVER, php://input),
// routed and method-overridden the way Laravel (Symfony's Request) does.
// Every protected handler that runs says so in `X-Handler` (the action) and
// `X-Identity` (whom it ran for, as this app identifies them); `X-Read`
// shows the raw value it read.
// Run as: php -d variables_order=EGPCS -d request_order=GPC -S 127.0.0.1:PORT router.php
// (PHP's built-in defaults, where request_order is unset and variables_order is EGPCS: $_REQUEST holds GET, then POST, then COOKIE, the later winning. Debian's php.ini says "GP".)

// The account table's collation, as MySQL 8's default utf8mb4_0900_ai_ci
// compares: accents, case and default-ignorable characters do not tell two
// emails apart; compatibility forms fold (NFKD). The same fold in every origin.
function account(string $email): string
{
    $folded = transliterator_transliterate('NFKD; [:M:] Remove; Lower();', $email);
    $ignorable = '/[\x{00AD}\x{034F}\x{061C}\x{115F}\x{1160}\x{17B4}\x{17B5}\x{180B}-\x{180F}\x{200B}-\x{200F}'
        . '\x{202A}-\x{202E}\x{2060}-\x{206F}\x{3164}\x{FE00}-\x{FE0F}\x{FEFF}\x{FFA0}\x{FFF0}-\x{FFF8}]/u';
    return trim(preg_replace($ignorable, '', $folded ?: $email) ?? $email);
}

function ran(string $action, $identity, $read, int $status = 200): void
{
    http_response_code($status);
    header('X-Handler: ' . $action);
    header('X-Identity: ' . rawurlencode((string) $identity));
    header('X-Read: ' . rawurlencode(json_encode($read)));
    echo $action;
}

function answer(int $status, string $text): void
{
    http_response_code($status);
    echo $text;
}

// Symfony's Request::getMethod(): a POST may name another method in the
// X-HTTP-Method-Override header, else in `_method` (body, then query), as
// Laravel enables; a name that is not all letters is refused.
function request_method(): ?string
{
    $method = strtoupper($_SERVER['REQUEST_METHOD']);
    if ($method !== 'POST') {
        return $method;
    }
    $override = $_SERVER['HTTP_X_HTTP_METHOD_OVERRIDE'] ?? '';
    if ($override === '') {
        $override = $_POST['_method'] ?? $_GET['_method'] ?? 'POST';
    }
    if (!is_string($override)) {
        return null;
    }
    $override = strtoupper($override);
    return preg_match('/^[A-Z]++$/D', $override) ? $override : null;
}

// Laravel's route path: the decoded path without its surrounding slashes.
$raw_path = explode('?', $_SERVER['REQUEST_URI'], 2)[0];
$path = trim(rawurldecode($raw_path), '/');
$method = request_method();
if ($method === null) {
    answer(400, 'suspicious method override');
    return true;
}
$ip = $_SERVER['HTTP_CF_CONNECTING_IP'] ?? '';

if ($path === '__health') {
    answer(200, 'ok');
} elseif ($path === 'api/example') {
    $mode = $_REQUEST['mode'] ?? null;
    if ($mode === 'heavy') {
        ran('heavy', $ip, $mode);
    } else {
        answer(200, 'normal');
    }
} elseif (preg_match('#^api/schools/([^/]+)/ai/.+$#D', $path, $m) && in_array($method, ['GET', 'POST'], true)) {
    $school = (int) $m[1];
    if ($school < 1) {
        answer(404, 'no such school');
    } else {
        ran('tenant', $school, $m[1]);
    }
} elseif ($path === 'login' && $method === 'POST') {
    $type = $_SERVER['CONTENT_TYPE'] ?? '';
    if (str_contains($type, '/json') || str_contains($type, '+json')) {
        $json = json_decode(file_get_contents('php://input'), true);
        $email = is_array($json) ? ($json['email'] ?? null) : null;
    } else {
        $email = $_REQUEST['email'] ?? null;
    }
    if (!is_string($email) || trim($email) === '') {
        answer(400, 'email required');
    } else {
        ran('login', account($email), $email, 401);
    }
} elseif (preg_match('#^posts/(\d+)$#D', $path, $m) && $method === 'DELETE') {
    ran('delete', $ip, ['method' => $method, 'sent' => $_SERVER['REQUEST_METHOD']]);
} elseif ($path === 'api/v1/data' && in_array($method, ['GET', 'HEAD'], true)) {
    $key = $_SERVER['HTTP_X_API_KEY'] ?? '';
    if (preg_match('/^key-\d+$/D', $key)) {
        ran('apikey', $key, $key);
    } else {
        answer(401, 'bad key');
    }
} elseif ($path === 'account/export' && in_array($method, ['GET', 'HEAD'], true)) {
    $session = $_COOKIE['laravel_session'] ?? '';
    if (is_string($session) && preg_match('/^sess-\d+$/D', $session)) {
        ran('session', $session, $session);
    } else {
        answer(401, 'no session');
    }
} else {
    answer(404, 'not found');
}
return true;
