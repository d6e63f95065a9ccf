-- ron.wallet.request: the checks of a request, synchronous on the loop thread: its bearer
-- token (WLT-3) and a body's headers (Content-Type, Content-Encoding). Part of
-- ron.wallet.service (its facade copies .methods onto the service's class).
local A = require("ron.wallet.answer")
local b3 = require("ron.base.b3")

local match, lower = string.match, string.lower

local prob = A.prob

local M = {}
local W = {}
M.methods = W
M.TOKEN_MEMO = 1024 -- Authorization values remembered (of known tokens only)

function W:_auth(req)
    local auth = req.headers.authorization
    if not auth then
        return nil, prob("no_token", "Authorization: Bearer <token> is required",
                         { ["WWW-Authenticate"] = 'Bearer realm="ron-wallet"' })
    end
    -- A known header value's principal without hashing it again (the cached balance read
    -- answers in ~30 us: BLAKE3 and hex of the token were a tenth of it). Only known tokens
    -- enter; bounded: emptied at TOKEN_MEMO entries.
    local memo = self.token_memo
    local who = memo[auth]
    if who then return who end
    local token = match(auth, "^[Bb][Ee][Aa][Rr][Ee][Rr] +([%w%-%._~%+/]+=*) *$")
    who = token and #token <= 4096 and self.tokens[b3.hex(token)]
    if who then
        if self.n_token_memo >= M.TOKEN_MEMO then
            memo = {}
            self.token_memo, self.n_token_memo = memo, 0
        end
        memo[auth], self.n_token_memo = who, self.n_token_memo + 1
    end
    if not who then
        return nil, prob("bad_token", "unknown bearer token",
                         { ["WWW-Authenticate"] =
                               'Bearer realm="ron-wallet", error="invalid_token"' })
    end
    return who
end

local function is_json(ct)
    if ct == "application/json" then return true end -- (the usual spelling: no lower, no match)
    if not ct then return false end
    local mt, params = match(lower(ct), "^%s*([^;%s]+)%s*(.*)$")
    if mt ~= "application/json" then return false end
    if params == "" then return true end
    return match(params, "^;%s*charset%s*=%s*\"?utf%-8\"?%s*$") ~= nil
end

function W:_body_checks(req)
    if not is_json(req.headers["content-type"]) then
        return prob("content_type", "Content-Type must be application/json")
    end
    local ce = req.headers["content-encoding"]
    if ce and lower(ce) ~= "identity" then
        return prob("content_encoding", "compressed bodies are not accepted (send identity)")
    end
    return nil
end

return M
