/** Wallet resources as the wire shows them (spec section 2). */
import type { WalletObject } from "../api/UsersApi.ts"
import { toRfc3339 } from "../domain/Time.ts"
import type { Wallet } from "../wallets/WalletRepository.ts"

export const walletObject = (wallet: Wallet): WalletObject => ({
  id: wallet.id,
  tenantId: wallet.tenantId,
  userId: wallet.userId,
  chainFamily: wallet.chainFamily,
  name: wallet.name,
  seq: wallet.seq,
  isDefault: wallet.isDefault,
  status: wallet.status,
  address: wallet.address,
  createdAt: toRfc3339(wallet.createdAt)
})

/** List items of GET /v1/wallets: no tenantId, with customerRefId. */
export const walletListItem = (wallet: Wallet) => {
  const { tenantId: _tenantId, ...rest } = walletObject(wallet)
  return { ...rest, customerRefId: wallet.customerRefId }
}
