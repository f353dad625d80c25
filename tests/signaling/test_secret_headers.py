"""The access log's mask (signaling/secret_headers.py) on lines as aiohttp writes them."""

from signaling.secret_headers import mask_secrets


def test_tokens_in_urls_and_bearer_credentials_are_masked_and_nothing_else_changes():
    line = (
        '127.0.0.1 [07/Dec/2026:21:04:45 +0000] "GET /watch/cam?background=black&token=fv_abc-DEF_123 HTTP/1.1" '
        '200 980 "http://h/watch/cam?token=fv_xyz" "Authorization: Bearer ff_secretkey"'
    )
    masked = mask_secrets(line)
    assert "fv_abc" not in masked and "fv_xyz" not in masked and "ff_secretkey" not in masked
    assert '"GET /watch/cam?background=black&token=*** HTTP/1.1" 200 980 "http://h/watch/cam?token=***"' in masked
    assert masked.endswith('"Authorization: Bearer ***"')
    plain = '127.0.0.1 [07/Dec/2026:21:04:45 +0000] "POST /whep/cam HTTP/1.1" 201 2649 "-" "Lavf/63.1.102"'
    assert mask_secrets(plain) == plain
