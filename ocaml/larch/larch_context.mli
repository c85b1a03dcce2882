(** larch as an Octez context backend: the names and argument orders of Octez's context
    signature, synchronous (docs/ocaml.md; larch_context.ml's header shows the Lwt wrapping).

    Every function raises {!Error} with larch's typed error text ([larch: ...]) on failure. Keys
    are [string list], values [bytes], hashes 32 raw bytes (Octez's [Context_hash.to_bytes]). *)

exception Error of string

type index

(** A context: a tree and the commit(s) it was checked out from. An immutable value: a change
    moves the tree into the new context and changes it in place, and the input keeps what rebuilds
    its own tree if it is used again (docs/ocaml.md); with [~consume:true] the input raises on
    any later use instead. *)
type t = Larch_raw.context

type context = t

type key = string list

type value = bytes

type tree = Larch_raw.tree

(** 32 raw bytes. *)
type hash = string

type depth = [`Eq of int | `Le of int | `Lt of int | `Ge of int | `Gt of int]

(** {1 Index} *)

(** [init ?readonly ?sync dir] opens the store in [dir] (a writer creates it when absent).
    [sync]: ["commit"] (default: a commit that returned is durable), ["pipelined"],
    ["every N"], ["never"]. *)
val init : ?readonly:bool -> ?sync:string -> string -> index

(** Publishes and syncs what a writer staged, releases the store. Contexts and trees stay
    valid values; what needs the store then raises. *)
val close : index -> unit

(** A writer: makes every commit durable and visible to readers. A reader: sees new commits. *)
val sync : index -> unit

(** Garbage collection: keeps commit [hash] and every commit after it. *)
val gc : index -> hash -> unit

(** Writes commit [hash] as a snapshot file (docs/snapshot-format.md). *)
val export_snapshot : index -> hash -> path:string -> unit

val exists : index -> hash -> bool

(** The head of the store (branch [main]). *)
val head : index -> hash option

(** {1 Contexts} *)

(** A new empty context (no parent). *)
val empty : index -> t

val index : t -> index

(** [None] when the store does not hold [hash]. *)
val checkout : index -> hash -> t option

val checkout_exn : index -> hash -> t

val mem : t -> key -> bool

val mem_tree : t -> key -> bool

val find : t -> key -> value option

val find_tree : t -> key -> tree option

(** The page [\[offset, offset + length)] of the directory at [key], in Irmin's order
    (docs/list-order.md). *)
val list : t -> ?offset:int -> ?length:int -> key -> (string * tree) list

val length : t -> key -> int

val add : ?consume:bool -> t -> key -> value -> t

(** [add_tree ctxt [] tree] replaces the whole tree. *)
val add_tree : ?consume:bool -> t -> key -> tree -> t

val remove : ?consume:bool -> t -> key -> t

(** Octez's [Context.copy]: [None] when [from] is absent. *)
val copy : ?consume:bool -> t -> from:key -> to_:key -> t option

(** Directories before their entries; paths relative to [key]; Irmin 3.7.2's depth rules;
    [`Undefined] is Irmin's listing order, [`Sorted] by name bytes. *)
val fold :
  ?depth:depth ->
  t ->
  key ->
  order:[`Sorted | `Undefined] ->
  init:'a ->
  f:(key -> tree -> 'a -> 'a) ->
  'a

val get_tree : t -> tree

(** {1 Commits} *)

(** Commits the context's tree and moves the branch [main]; returns the commit hash. The
    author is ["Tezos"] and the parents those of the context unless given. *)
val commit :
  time:int64 ->
  ?author:string ->
  ?message:string ->
  ?parents:hash list ->
  t ->
  hash

(** The hash [commit] would return, without writing anything. *)
val hash :
  time:int64 ->
  ?author:string ->
  ?message:string ->
  ?parents:hash list ->
  t ->
  hash

(** {1 Trees} *)

module Tree : sig
  val mem : tree -> key -> bool

  val mem_tree : tree -> key -> bool

  val find : tree -> key -> value option

  val find_tree : tree -> key -> tree option

  val list : tree -> ?offset:int -> ?length:int -> key -> (string * tree) list

  val length : tree -> key -> int

  val add : tree -> key -> value -> tree

  val add_tree : tree -> key -> tree -> tree

  val remove : tree -> key -> tree

  val fold :
    ?depth:depth ->
    tree ->
    key ->
    order:[`Sorted | `Undefined] ->
    init:'a ->
    f:(key -> tree -> 'a -> 'a) ->
    'a

  val empty : t -> tree

  val is_empty : tree -> bool

  val kind : tree -> [`Value | `Tree]

  val to_value : tree -> value option

  val of_value : t -> value -> tree

  (** A directory's node hash or a value's contents hash. *)
  val hash : tree -> hash

  (** Same hash. *)
  val equal : tree -> tree -> bool
end

(** {1 Merkle proofs} (docs/proofs.md) *)

module Proof : sig
  (** The computation a proof covers (Octez runs a closure on a tree instead). *)
  type op =
    | Find of key
    | Mem of key
    | Mem_tree of key
    | Add of key * bytes
    | Remove of key

  type result = Value of bytes option | Bool of bool | Unit

  (** [Merkle_proof_encoding.V1.Tree32] or [V2.Tree32] (proofs of larch's 32-ary contexts), or
      [V1.Tree2] or [V2.Tree2]: tree proofs of Octez's binary-tree context ([Context_binary],
      version 2), which {!verify_tree_proof} verifies (larch does not produce them: its contexts
      are 32-ary; producing in a [Tree2] encoding raises {!Error}). *)
  type encoding = V1 | V2 | V1_tree2 | V2_tree2

  type produced = {
    proof : bytes;  (** encoded *)
    before : hash;
    after : hash;
    results : result list;
  }

  (** The tree proof of [ops] on commit [hash] (default encoding [V2]). *)
  val produce_tree_proof :
    ?encoding:encoding -> index -> hash -> op list -> produced

  val produce_tree_proof_of_tree : ?encoding:encoding -> tree -> op list -> produced

  (** [(before, after, results)], or {!Error} when the proof is rejected. *)
  val verify_tree_proof :
    ?encoding:encoding -> bytes -> op list -> hash * hash * result list

  (** The stream proof of [ops] on commit [hash] (Octez [produce_stream_proof]): the objects
      read, in order, in [Merkle_proof_encoding]'s [stream_proof_encoding] (default [V2]). *)
  val produce_stream_proof :
    ?encoding:encoding -> index -> hash -> op list -> produced

  val produce_stream_proof_of_tree : ?encoding:encoding -> tree -> op list -> produced

  (** [(before, after, results)], or {!Error} when the stream proof is rejected (too short, too
      long, or an element that does not hash to what the replay looks for). *)
  val verify_stream_proof :
    ?encoding:encoding -> bytes -> op list -> hash * hash * result list

  (** Octez's [Proof.merkle_leaf_kind]. *)
  type leaf_kind = Hole | Raw_context

  (** Octez's [Context.merkle_tree_v2 ctxt leaf_kind key]: the tree proof (version 0, encoded,
      default [V2]) of Octez's [get_data leaf_kind [key]] on the context's tree. [Hole] reads
      nothing: the proof's state is the blinded root. [Raw_context] reveals the path to
      [data/key] and the value there, or the whole directory there (Octez's [unshallow]). Verify
      it with {!verify_tree_proof} and the reads it covers. *)
  val merkle_tree_v2 : ?encoding:encoding -> context -> leaf_kind -> key -> bytes
end

(** {!Proof.merkle_tree_v2}, with Octez's name at the top of the context module. *)
val merkle_tree_v2 :
  ?encoding:Proof.encoding -> context -> Proof.leaf_kind -> key -> bytes

(** {1 Hashes as text} *)

(** [Co…], as Octez prints a context hash. *)
val hash_to_b58 : hash -> string

(** From [Co…] or hex. *)
val hash_of_text : string -> hash

val to_hex : string -> string

val of_hex : string -> string
